#include "coordinator/sweep/run_config.h"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"
#include "model/config/architectures.h"
#include "model/config/param_count.h"
#include "task/run_config.h"

namespace hlab::sweep {

std::string ShortHash(absl::string_view data) {
  return Sha256Hex(data).substr(0, 16);
}

absl::StatusOr<hlab::model::ModelConfig> ResolveModel(
    const hlab::v1::SweepSpec& spec, const hlab::v1::Architecture& arch,
    const hlab::v1::Scale& scale) {
  hlab::model::ModelConfig config;
  config.vocab_size = scale.vocab_size();
  config.d_model = scale.d_model();
  config.n_layers = scale.n_layers();
  config.n_heads = scale.n_heads();
  config.n_kv_heads = scale.n_kv_heads();
  config.head_dim = scale.head_dim();
  config.ffn_hidden = scale.ffn_hidden();
  config.rope_theta = EffectiveRopeTheta(spec, scale);
  config.arch = arch.name();
  const std::string& layers =
      arch.pattern().empty() ? arch.name() : arch.pattern();
  HLAB_ASSIGN_OR_RETURN(
      config.layers, hlab::model::ExpandArchitecture(layers, config.n_layers));
  HLAB_RETURN_IF_ERROR(hlab::model::ValidateModelConfig(config));
  if (!spec.match_params()) return config;
  absl::StatusOr<hlab::model::MatchReport> matched =
      hlab::model::MatchParameters(config);
  if (!matched.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter matching failed: ", matched.status().message(),
                     "; set match_params: false to train it unmatched"));
  }
  return matched->config;
}

hlab::v1::SweepSpec SpecForScale(const hlab::v1::SweepSpec& spec,
                                 const hlab::v1::Scale& scale) {
  hlab::v1::SweepSpec out = spec;
  if (!scale.budgets().tokens_per_param().empty() ||
      !scale.budgets().tokens().empty()) {
    *out.mutable_budgets() = scale.budgets();
  }
  if (scale.batch_tokens() != 0) out.set_batch_tokens(scale.batch_tokens());
  if (scale.peak_lr() != 0)
    out.mutable_schedule()->set_peak_lr(scale.peak_lr());
  return out;
}

int64_t WarmupSteps(const hlab::v1::SweepSpec& spec) {
  const hlab::v1::ScheduleSpec& s = spec.schedule();
  if (s.warmup_tokens() > 0 && spec.batch_tokens() > 0) {
    return (s.warmup_tokens() + spec.batch_tokens() - 1) / spec.batch_tokens();
  }
  return s.warmup_steps();
}

int BudgetCount(const hlab::v1::SweepSpec& spec) {
  return spec.budgets().tokens_per_param_size() + spec.budgets().tokens_size();
}

int64_t BudgetTokens(const hlab::v1::SweepSpec& spec, int index,
                     int64_t non_embedding) {
  const hlab::v1::Budgets& b = spec.budgets();
  const double raw =
      index < b.tokens_per_param_size()
          ? b.tokens_per_param(index) * static_cast<double>(non_embedding)
          : static_cast<double>(b.tokens(index - b.tokens_per_param_size()));
  const double batch = static_cast<double>(spec.batch_tokens());
  const int64_t batches =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(raw / batch)));
  return batches * spec.batch_tokens();
}

int64_t DecayStartStep(const hlab::v1::SweepSpec& spec, int64_t total_steps) {
  const int64_t decay = static_cast<int64_t>(std::llround(
      spec.schedule().decay_fraction() * static_cast<double>(total_steps)));
  return std::max(total_steps - decay, WarmupSteps(spec));
}

std::string CanonicalRunConfig(const hlab::v1::SweepSpec& spec,
                               const hlab::model::ModelConfig& model,
                               int64_t tokens, int64_t seed) {
  task::RunConfig run;
  run.model = model;
  run.seq_len = spec.seq_len();
  run.batch_tokens = spec.batch_tokens();
  run.tokens = tokens;
  run.steps = tokens / spec.batch_tokens();
  run.seed = seed;
  const hlab::v1::DataSpec& d = spec.data();
  run.data.source = d.source();
  if (d.source() == "prepared") run.data.path = d.path();
  if (d.source() == "synthetic") {
    run.data.seed = d.seed();
    run.data.corpus_version = task::kSyntheticCorpusVersion;
  }
  run.data.long_fraction = d.long_fraction();
  const hlab::v1::ScheduleSpec& s = spec.schedule();
  run.schedule.peak_lr = s.peak_lr();
  run.schedule.warmup_steps = WarmupSteps(spec);
  run.schedule.decay_fraction = s.decay_fraction();
  run.schedule.decay_shape = s.decay_shape();
  run.schedule.min_lr_ratio = s.min_lr_ratio();
  run.schedule.weight_decay = s.weight_decay();
  run.schedule.grad_clip = s.grad_clip();
  // Sorted keys, doubles in their shortest round-trip form: canonical text.
  return task::RunConfigToJson(run);
}

std::string SpecHash(const hlab::v1::SweepSpec& spec) {
  return ShortHash(SweepSpecToCanonicalJson(WithDefaults(spec)));
}

}  // namespace hlab::sweep
