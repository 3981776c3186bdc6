// A run's resolved configuration and the hashes that identify runs and specs.
//
// A run is one (architecture, scale, budget, seed) of a sweep. Its canonical
// config is compact JSON with sorted keys holding everything that changes the
// trained model (layers and dimensions, data, schedule, batch, tokens, seed)
// and nothing that does not (sweep name, architecture label, how the budget
// was written). Its id is the first 16 hex digits of SHA-256 over that text,
// so identical runs in different sweeps share one id.
//
// Thread-safe (pure functions). The spec arguments must have defaults applied
// (spec_defaults.h).
//
//   HLAB_ASSIGN_OR_RETURN(ModelConfig m, ResolveModel(spec, arch, scale));
//   int64_t n = CountParameters(m).non_embedding;
//   std::string config = CanonicalRunConfig(spec, m, BudgetTokens(spec, 0, n),
//   0); std::string id = ShortHash(config);
#ifndef HLAB_COORDINATOR_SWEEP_RUN_CONFIG_H_
#define HLAB_COORDINATOR_SWEEP_RUN_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"
#include "hlab/v1/sweep.pb.h"
#include "model/config/model_config.h"

namespace hlab::sweep {

// Lowercase hex SHA-256 (common/sha256.h) and its first 16 digits.
using ::hlab::Sha256Hex;
std::string ShortHash(absl::string_view data);

// The model of one (architecture, scale): the named architecture (or the
// custom pattern) expanded to the scale's layers, validated, and matched to
// its Full backbone when spec.match_params(). InvalidArgument naming the
// problem (without a field path; the validator adds it).
absl::StatusOr<hlab::model::ModelConfig> ResolveModel(
    const hlab::v1::SweepSpec& spec, const hlab::v1::Architecture& arch,
    const hlab::v1::Scale& scale);

// The spec as seen by the runs of one scale: the scale's overrides
// (budgets, batch_tokens, peak_lr) replace the sweep's values. Every other
// function here takes such a per-scale spec when it computes run values.
hlab::v1::SweepSpec SpecForScale(const hlab::v1::SweepSpec& spec,
                                 const hlab::v1::Scale& scale);

// Warmup in optimizer steps: warmup_steps, or warmup_tokens rounded up to
// whole batches.
int64_t WarmupSteps(const hlab::v1::SweepSpec& spec);

// Budget `index` of the spec in tokens for a model with `non_embedding`
// parameters: ratio * N (or the absolute count) rounded to the nearest whole
// number of batches, at least one batch.
int64_t BudgetTokens(const hlab::v1::SweepSpec& spec, int index,
                     int64_t non_embedding);
int BudgetCount(const hlab::v1::SweepSpec& spec);

// First step of the decay phase of a run of `total_steps`, exactly as
// task/lr_schedule.h's WsdSchedule computes it: total - round(fraction *
// total), at least the warmup. This is the run's WSD branch point.
int64_t DecayStartStep(const hlab::v1::SweepSpec& spec, int64_t total_steps);

// The canonical resolved config of one run (compact JSON, sorted keys).
std::string CanonicalRunConfig(const hlab::v1::SweepSpec& spec,
                               const hlab::model::ModelConfig& model,
                               int64_t tokens, int64_t seed);

// Hash of the canonical spec (defaults applied first), for SubmitSweep
// idempotency: key order, comments and spelled-out defaults do not matter.
std::string SpecHash(const hlab::v1::SweepSpec& spec);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_RUN_CONFIG_H_
