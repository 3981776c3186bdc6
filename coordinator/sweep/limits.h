// The input limits of a sweep spec, in one place. ValidateSweepSpec refuses
// a spec past any of them with an InvalidArgument that names the field and
// the limit, e.g.
//   "scales[0].d_model: 1000000000000 is over the limit of 65536"
// They are far beyond any model or study hlab is for (Llama 3 405B has
// d_model 16384, 126 layers, 128 heads, a 128K vocabulary and 15T training
// tokens), and low enough that every product the planner forms (parameters,
// tokens, FLOPs, runs) fits its integer type. The model sizes are within
// the model's own bounds (model/config/model_config.h, which every task
// file meets), checked below at compile time. docs/sweeps.md lists them.
//
//   if (spec.name().size() > kMaxNameLength) return Bad("name", ...);
#ifndef HLAB_COORDINATOR_SWEEP_LIMITS_H_
#define HLAB_COORDINATOR_SWEEP_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "model/config/model_config.h"

namespace hlab::sweep {

// Names: the sweep's, each architecture's and each scale's.
inline constexpr size_t kMaxNameLength = 128;
// An architecture's layer pattern ("swa:16,full", or one entry per layer).
inline constexpr size_t kMaxPatternLength = 16384;

// List lengths.
inline constexpr int kMaxArchitectures = 64;
inline constexpr int kMaxScales = 64;
inline constexpr int kMaxBudgets = 64;  // per budget list
inline constexpr int kMaxSeeds = 64;
inline constexpr int kMaxEvalPoints = 64;  // NIAH lengths, NIAH depths,
                                           // multiple-choice tasks
// EVAL tasks that evaluation.trajectory may add to one sweep (each is a
// process start and a checkpoint kept on disk).
inline constexpr int64_t kMaxTrajectoryEvals = 10000;
// Runs of the whole grid: architectures x scales x budgets x seeds.
inline constexpr int64_t kMaxRuns = 100000;

// Model sizes.
inline constexpr int64_t kMaxDModel = 65536;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxFfnHidden = int64_t{1} << 20;
inline constexpr int64_t kMaxVocabSize = model::kMaxVocab;
static_assert(kMaxDModel <= model::kMaxWidth && kMaxHeads <= model::kMaxWidth &&
                  kMaxHeadDim <= model::kMaxWidth &&
                  kMaxFfnHidden <= model::kMaxWidth &&
                  kMaxLayers <= model::kMaxLayers,
              "a sweep's model sizes must be within the model's own bounds");

// Token counts.
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 30;
inline constexpr double kMaxTokensPerParam = 1e6;
inline constexpr int64_t kMaxTokensPerRun = 1'000'000'000'000'000;  // 1e15

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_LIMITS_H_
