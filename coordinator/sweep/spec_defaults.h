// Defaults of the sweep spec, applied in one place.
//
// Every field whose default is not proto3's zero value is filled in here
// (docs/sweeps.md lists them), so the rest of the coordinator reads plain
// values, and a spec that spells out a default hashes like one that omits it.
// Thread-safe (pure functions).
//
//   hlab::v1::SweepSpec full = WithDefaults(spec);
//   bool share = full.share_trunk();  // set: true unless the user said false
#ifndef HLAB_COORDINATOR_SWEEP_SPEC_DEFAULTS_H_
#define HLAB_COORDINATOR_SWEEP_SPEC_DEFAULTS_H_

#include "hlab/v1/sweep.pb.h"

namespace hlab::sweep {

inline constexpr double kDefaultDecayFraction = 0.1;
inline constexpr double kDefaultMinLrRatio = 0.1;
inline constexpr double kDefaultWeightDecay = 0.1;
inline constexpr double kDefaultGradClip = 1.0;
inline constexpr double kDefaultLongFraction = 0.5;
inline constexpr int64_t kDefaultVocabSize = 256;
inline constexpr int kDefaultMaxAttemptsPerRun = 3;
inline constexpr int kDefaultMaxRetriesPerSweep = 20;
inline constexpr double kDefaultBackoffBaseSeconds = 10;
inline constexpr double kDefaultBackoffMaxSeconds = 600;
inline constexpr int kDefaultBootstrap = 1000;
inline constexpr int64_t kDefaultNiahSamples = 20;
inline constexpr double kDefaultRopeTheta = 10000.0;

// Returns `spec` with every unset defaulted field set. Values that cannot be
// derived (head_dim when n_heads does not divide d_model) stay unset for the
// validator to report.
hlab::v1::SweepSpec WithDefaults(const hlab::v1::SweepSpec& spec);

// The RoPE base of `scale`'s models: the scale's, else the sweep's, else
// kDefaultRopeTheta. WithDefaults clears a value equal to what it would
// default to (so specs written before the field existed keep their hash)
// instead of setting one.
double EffectiveRopeTheta(const hlab::v1::SweepSpec& spec,
                          const hlab::v1::Scale& scale);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_SPEC_DEFAULTS_H_
