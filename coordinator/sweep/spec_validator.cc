#include "coordinator/sweep/spec_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/sweep/run_config.h"
#include "coordinator/sweep/spec_defaults.h"
#include "model/config/param_count.h"

namespace hlab::sweep {
namespace {

using hlab::v1::SweepSpec;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string Index(const std::string& field, int i) {
  return absl::StrCat(field, "[", i, "]");
}

template <typename Names>
bool Contains(const Names& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> ScaleNames(const SweepSpec& spec) {
  std::vector<std::string> names;
  for (const auto& s : spec.scales()) names.push_back(s.name());
  return names;
}

std::vector<std::string> ArchitectureNames(const SweepSpec& spec) {
  std::vector<std::string> names;
  for (const auto& a : spec.architectures()) names.push_back(a.name());
  return names;
}

absl::Status CheckTopLevel(const SweepSpec& spec) {
  if (spec.name().empty()) {
    return Bad("name", "missing; give the sweep a name such as 'demo'");
  }
  if (spec.seq_len() <= 0) {
    return Bad("seq_len", absl::StrCat("must be > 0, got ", spec.seq_len()));
  }
  if (spec.batch_tokens() <= 0) {
    return Bad("batch_tokens",
               absl::StrCat("must be > 0, got ", spec.batch_tokens()));
  }
  if (spec.batch_tokens() % spec.seq_len() != 0) {
    return Bad("batch_tokens",
               absl::StrCat("must be a multiple of seq_len = ", spec.seq_len(),
                            ", got ", spec.batch_tokens(),
                            "; use sequences-per-batch x seq_len"));
  }
  if (spec.priority() < -1000 || spec.priority() > 1000) {
    return Bad("priority",
               absl::StrCat("must be in [-1000, 1000], got ", spec.priority()));
  }
  std::set<int64_t> seeds;
  for (int i = 0; i < spec.seeds_size(); ++i) {
    if (spec.seeds(i) < 0) {
      return Bad(Index("seeds", i),
                 absl::StrCat("must be >= 0, got ", spec.seeds(i)));
    }
    if (!seeds.insert(spec.seeds(i)).second) {
      return Bad(Index("seeds", i),
                 absl::StrCat("duplicate seed ", spec.seeds(i),
                              "; seeds must be unique"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBudgets(const hlab::v1::Budgets& b,
                          const std::string& field) {
  if (b.tokens_per_param().empty() && b.tokens().empty()) {
    return Bad(field, "empty; give tokens_per_param (D/N ratios) or tokens");
  }
  if (!b.tokens_per_param().empty() && !b.tokens().empty()) {
    return Bad(field + ".tokens",
               "give either tokens_per_param or tokens, not both");
  }
  std::set<double> ratios;
  for (int i = 0; i < b.tokens_per_param_size(); ++i) {
    const std::string at = Index(field + ".tokens_per_param", i);
    if (!(b.tokens_per_param(i) > 0)) {
      return Bad(at, absl::StrCat("must be > 0, got ", b.tokens_per_param(i)));
    }
    if (!ratios.insert(b.tokens_per_param(i)).second) {
      return Bad(at, "duplicate budget; budgets must be unique");
    }
  }
  std::set<int64_t> tokens;
  for (int i = 0; i < b.tokens_size(); ++i) {
    const std::string at = Index(field + ".tokens", i);
    if (b.tokens(i) <= 0) {
      return Bad(at, absl::StrCat("must be > 0, got ", b.tokens(i)));
    }
    if (!tokens.insert(b.tokens(i)).second) {
      return Bad(at, "duplicate budget; budgets must be unique");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGrid(const SweepSpec& spec) {
  if (spec.architectures().empty()) {
    return Bad("architectures",
               "empty; list at least one, e.g. [full, swa-128]");
  }
  std::set<std::string> archs;
  for (int i = 0; i < spec.architectures_size(); ++i) {
    const auto& a = spec.architectures(i);
    if (a.name().empty())
      return Bad(Index("architectures", i) + ".name", "missing");
    if (!archs.insert(a.name()).second) {
      return Bad(Index("architectures", i) + ".name",
                 absl::StrCat("duplicate architecture '", a.name(),
                              "'; list each architecture once"));
    }
  }
  if (spec.scales().empty()) {
    return Bad("scales", "empty; list at least one model scale");
  }
  std::set<std::string> scales;
  for (int i = 0; i < spec.scales_size(); ++i) {
    const auto& s = spec.scales(i);
    const std::string at = Index("scales", i);
    if (s.name().empty()) return Bad(at + ".name", "missing");
    if (!scales.insert(s.name()).second) {
      return Bad(at + ".name", absl::StrCat("duplicate scale name '", s.name(),
                                            "'; scale names must be unique"));
    }
    if (s.d_model() <= 0) return Bad(at + ".d_model", "must be > 0");
    if (s.n_layers() <= 0) return Bad(at + ".n_layers", "must be > 0");
    if (s.n_heads() <= 0) return Bad(at + ".n_heads", "must be > 0");
    if (s.n_kv_heads() <= 0 || s.n_heads() % s.n_kv_heads() != 0) {
      return Bad(at + ".n_kv_heads",
                 absl::StrCat("must divide n_heads = ", s.n_heads(), ", got ",
                              s.n_kv_heads()));
    }
    if (s.head_dim() <= 0) {
      return Bad(at + ".head_dim",
                 absl::StrCat("n_heads = ", s.n_heads(),
                              " does not divide d_model = ", s.d_model(),
                              "; give head_dim explicitly"));
    }
    if (s.ffn_hidden() < 0) return Bad(at + ".ffn_hidden", "must be > 0");
    if (s.vocab_size() <= 1) return Bad(at + ".vocab_size", "must be > 1");
    if (s.batch_tokens() < 0 || s.batch_tokens() % spec.seq_len() != 0) {
      return Bad(at + ".batch_tokens",
                 absl::StrCat("must be a positive multiple of seq_len = ",
                              spec.seq_len(), ", got ", s.batch_tokens()));
    }
    if (s.peak_lr() < 0) {
      return Bad(at + ".peak_lr",
                 absl::StrCat("must be > 0, got ", s.peak_lr()));
    }
    // The scale's dimensions as model/config checks them, on the Full
    // backbone (architecture-specific problems are reported later).
    hlab::v1::Architecture full;
    full.set_name("full");
    hlab::v1::SweepSpec unmatched = spec;
    unmatched.set_match_params(false);
    absl::StatusOr<hlab::model::ModelConfig> backbone =
        ResolveModel(unmatched, full, s);
    if (!backbone.ok()) {
      return Bad(at, std::string(backbone.status().message()));
    }
  }
  bool every_scale_has_budgets = true;
  for (int i = 0; i < spec.scales_size(); ++i) {
    const auto& sb = spec.scales(i).budgets();
    if (sb.tokens_per_param().empty() && sb.tokens().empty()) {
      every_scale_has_budgets = false;
    } else {
      HLAB_RETURN_IF_ERROR(CheckBudgets(sb, Index("scales", i) + ".budgets"));
    }
  }
  const auto& b = spec.budgets();
  if (!(every_scale_has_budgets && b.tokens_per_param().empty() &&
        b.tokens().empty())) {
    HLAB_RETURN_IF_ERROR(CheckBudgets(b, "budgets"));
  }
  return absl::OkStatus();
}

absl::Status CheckData(const SweepSpec& spec) {
  const auto& d = spec.data();
  if (d.source() != "synthetic" && d.source() != "prepared") {
    return Bad("data.source", absl::StrCat("unknown source '", d.source(),
                                           "'; use synthetic or prepared"));
  }
  if (d.source() == "prepared" && d.path().empty()) {
    return Bad("data.path", "required with source: prepared");
  }
  if (d.source() == "synthetic" && !d.path().empty()) {
    return Bad("data.path", "only for source: prepared");
  }
  if (!(d.long_fraction() >= 0 && d.long_fraction() <= 1)) {
    return Bad("data.long_fraction",
               absl::StrCat("must be in [0, 1], got ", d.long_fraction()));
  }
  if (d.validation_tokens() < 0) {
    return Bad("data.validation_tokens", "must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status CheckSchedule(const SweepSpec& spec) {
  const auto& s = spec.schedule();
  if (!(s.peak_lr() > 0)) {
    return Bad("schedule.peak_lr",
               absl::StrCat("must be > 0, got ", s.peak_lr()));
  }
  if (s.warmup_steps() < 0) return Bad("schedule.warmup_steps", "must be >= 0");
  if (s.warmup_tokens() < 0) {
    return Bad("schedule.warmup_tokens", "must be >= 0");
  }
  if (s.warmup_steps() > 0 && s.warmup_tokens() > 0) {
    return Bad("schedule.warmup_tokens",
               "give warmup_steps or warmup_tokens, not both");
  }
  if (!(s.decay_fraction() > 0 && s.decay_fraction() < 1)) {
    return Bad("schedule.decay_fraction",
               absl::StrCat("must be in (0, 1), got ", s.decay_fraction()));
  }
  if (s.decay_shape() != "linear" && s.decay_shape() != "cosine" &&
      s.decay_shape() != "1-sqrt") {
    return Bad("schedule.decay_shape",
               absl::StrCat("unknown shape '", s.decay_shape(),
                            "'; use linear, cosine or 1-sqrt"));
  }
  if (!(s.min_lr_ratio() >= 0 && s.min_lr_ratio() <= 1)) {
    return Bad("schedule.min_lr_ratio",
               absl::StrCat("must be in [0, 1], got ", s.min_lr_ratio()));
  }
  if (!(s.weight_decay() >= 0)) {
    return Bad("schedule.weight_decay", "must be >= 0");
  }
  if (!(s.grad_clip() > 0)) return Bad("schedule.grad_clip", "must be > 0");
  return absl::OkStatus();
}

absl::Status CheckEvaluation(const SweepSpec& spec) {
  const auto& e = spec.evaluation();
  if (e.validation_loss().tokens() < 0) {
    return Bad("evaluation.validation_loss.tokens", "must be >= 0");
  }
  if (e.at_branch_points() && !spec.share_trunk()) {
    return Bad("evaluation.at_branch_points",
               "needs share_trunk: true (branch points exist only on a "
               "shared trunk)");
  }
  const auto& l = e.longppl();
  const std::string lp = "evaluation.longppl";
  if (l.enabled()) {
    const auto& r = l.reference();
    const int kinds = (r.run_id().empty() ? 0 : 1) +
                      (r.checkpoint_path().empty() ? 0 : 1) +
                      (r.architecture().empty() ? 0 : 1);
    if (kinds > 1) {
      return Bad(lp + ".reference",
                 "give one of architecture/scale, run_id or checkpoint_path");
    }
    if (!r.architecture().empty() &&
        !Contains(ArchitectureNames(spec), r.architecture())) {
      return Bad(
          lp + ".reference.architecture",
          absl::StrCat("'", r.architecture(), "' is not among architectures (",
                       absl::StrJoin(ArchitectureNames(spec), ", "),
                       "); add it or name another"));
    }
    if (!r.scale().empty() && !Contains(ScaleNames(spec), r.scale())) {
      return Bad(lp + ".reference.scale",
                 absl::StrCat("unknown scale '", r.scale(), "'"));
    }
    if (!r.scale().empty() && r.architecture().empty()) {
      return Bad(lp + ".reference.scale", "only with reference.architecture");
    }
    if (l.trunc_len() <= 0 || l.trunc_len() >= l.context_len()) {
      return Bad(lp + ".trunc_len",
                 absl::StrCat("must be in (0, context_len = ", l.context_len(),
                              "), got ", l.trunc_len()));
    }
    if (l.sliding_window() <= 0) {
      return Bad(lp + ".sliding_window", "must be > 0");
    }
    if (l.context_len() > spec.seq_len()) {
      return Bad(lp + ".context_len",
                 absl::StrCat("must be <= seq_len = ", spec.seq_len()));
    }
  }
  const auto& n = e.niah();
  for (int i = 0; i < n.context_lengths_size(); ++i) {
    if (n.context_lengths(i) <= 0 || n.context_lengths(i) > spec.seq_len()) {
      return Bad(Index("evaluation.niah.context_lengths", i),
                 absl::StrCat("must be in [1, seq_len = ", spec.seq_len(),
                              "], got ", n.context_lengths(i)));
    }
  }
  for (int i = 0; i < n.depths_size(); ++i) {
    if (!(n.depths(i) >= 0 && n.depths(i) <= 1)) {
      return Bad(Index("evaluation.niah.depths", i),
                 absl::StrCat("must be in [0, 1], got ", n.depths(i)));
    }
  }
  if (n.samples() < 0) return Bad("evaluation.niah.samples", "must be >= 0");
  return absl::OkStatus();
}

absl::Status CheckResourcesAndRetry(const SweepSpec& spec) {
  std::set<std::string> seen;
  for (int i = 0; i < spec.resources_size(); ++i) {
    const auto& r = spec.resources(i);
    const std::string at = Index("resources", i);
    if (!Contains(ScaleNames(spec), r.scale())) {
      return Bad(at + ".scale",
                 absl::StrCat("unknown scale '", r.scale(), "' (scales: ",
                              absl::StrJoin(ScaleNames(spec), ", "), ")"));
    }
    if (!seen.insert(r.scale()).second) {
      return Bad(at + ".scale", absl::StrCat("duplicate resources for scale '",
                                             r.scale(), "'"));
    }
    if (r.gpus() < 0) return Bad(at + ".gpus", "must be >= 0");
    if (r.gpu_memory_bytes() < 0) {
      return Bad(at + ".gpu_memory_bytes", "must be >= 0");
    }
    if (r.gpu_memory_bytes() > 0 && r.gpus() == 0) {
      return Bad(at + ".gpu_memory_bytes", "only with gpus > 0");
    }
    if (r.cpu_threads() < 0) return Bad(at + ".cpu_threads", "must be >= 0");
  }
  const auto& r = spec.retry();
  if (r.max_attempts_per_run() < 1) {
    return Bad("retry.max_attempts_per_run",
               absl::StrCat("must be >= 1, got ", r.max_attempts_per_run()));
  }
  if (r.max_retries_per_sweep() < 0) {
    return Bad("retry.max_retries_per_sweep",
               absl::StrCat("must be >= 0, got ", r.max_retries_per_sweep()));
  }
  if (!(r.backoff_base_seconds() >= 0)) {
    return Bad("retry.backoff_base_seconds", "must be >= 0");
  }
  if (!(r.backoff_max_seconds() >= r.backoff_base_seconds())) {
    return Bad("retry.backoff_max_seconds", "must be >= backoff_base_seconds");
  }
  return absl::OkStatus();
}

absl::Status CheckFit(const SweepSpec& spec) {
  const auto& f = spec.fit();
  const std::vector<std::string> scales = ScaleNames(spec);
  std::set<std::string> fit;
  for (int i = 0; i < f.fit_scales_size(); ++i) {
    const std::string at = Index("fit.fit_scales", i);
    if (!Contains(scales, f.fit_scales(i))) {
      return Bad(at,
                 absl::StrCat("unknown scale '", f.fit_scales(i),
                              "' (scales: ", absl::StrJoin(scales, ", "), ")"));
    }
    if (!fit.insert(f.fit_scales(i)).second) {
      return Bad(at, "duplicate scale");
    }
  }
  std::set<std::string> verify;
  for (int i = 0; i < f.verify_scales_size(); ++i) {
    const std::string at = Index("fit.verify_scales", i);
    if (!Contains(scales, f.verify_scales(i))) {
      return Bad(at,
                 absl::StrCat("unknown scale '", f.verify_scales(i),
                              "' (scales: ", absl::StrJoin(scales, ", "), ")"));
    }
    if (fit.count(f.verify_scales(i)) > 0) {
      return Bad(at, absl::StrCat("scale '", f.verify_scales(i),
                                  "' is also a fit scale; held-out scales "
                                  "must not be fitted"));
    }
    if (!verify.insert(f.verify_scales(i)).second) {
      return Bad(at, "duplicate scale");
    }
  }
  for (int i = 0; i < f.targets_size(); ++i) {
    const std::string at = Index("fit.targets", i);
    if (f.targets(i) != "loss" && f.targets(i) != "longppl") {
      return Bad(at, absl::StrCat("unknown target '", f.targets(i),
                                  "'; use loss or longppl"));
    }
    if (f.targets(i) == "longppl" && !spec.evaluation().longppl().enabled()) {
      return Bad(at, "longppl needs evaluation.longppl.enabled: true");
    }
  }
  if (f.bootstrap() < 0) return Bad("fit.bootstrap", "must be >= 0");
  return absl::OkStatus();
}

// Resolves every (architecture, scale) model and checks each run's budget
// against the schedule.
absl::Status CheckModelsAndBudgets(const SweepSpec& sweep) {
  for (int a = 0; a < sweep.architectures_size(); ++a) {
    const auto& arch = sweep.architectures(a);
    const std::string field =
        absl::StrCat(Index("architectures", a),
                     arch.pattern().empty() ? ".name" : ".pattern");
    for (int s = 0; s < sweep.scales_size(); ++s) {
      const auto& scale = sweep.scales(s);
      const SweepSpec spec = SpecForScale(sweep, scale);
      const int64_t warmup = WarmupSteps(spec);
      const bool own_budgets = !scale.budgets().tokens_per_param().empty() ||
                               !scale.budgets().tokens().empty();
      const std::string budgets =
          own_budgets ? Index("scales", s) + ".budgets" : "budgets";
      absl::StatusOr<hlab::model::ModelConfig> model =
          ResolveModel(spec, arch, scale);
      if (!model.ok()) {
        return Bad(field,
                   absl::StrCat("'", arch.name(), "' at scale '", scale.name(),
                                "': ", model.status().message()));
      }
      for (size_t l = 0; l < model->layers.size(); ++l) {
        if (model->layers[l].window > spec.seq_len()) {
          return Bad(field, absl::StrCat(
                                "'", arch.name(), "': layer ", l,
                                " has window ", model->layers[l].window,
                                " > seq_len = ", spec.seq_len(),
                                "; use a window <= seq_len or raise seq_len"));
        }
      }
      const int64_t n = hlab::model::CountParameters(*model).non_embedding;
      std::map<int64_t, int> by_tokens;
      for (int b = 0; b < BudgetCount(spec); ++b) {
        const bool ratio = b < spec.budgets().tokens_per_param_size();
        const std::string at =
            ratio ? Index(budgets + ".tokens_per_param", b)
                  : Index(budgets + ".tokens",
                          b - spec.budgets().tokens_per_param_size());
        const int64_t tokens = BudgetTokens(spec, b, n);
        const int64_t steps = tokens / spec.batch_tokens();
        const std::string run = absl::StrCat(arch.name(), "/", scale.name());
        if (steps <= warmup) {
          return Bad(at, absl::StrCat("gives ", tokens, " tokens = ", steps,
                                      " steps for ", run,
                                      ", not more than the warmup (", warmup,
                                      " steps); raise the budget or shorten "
                                      "schedule.warmup_steps/warmup_tokens"));
        }
        if (DecayStartStep(spec, steps) >= steps) {
          return Bad(at, absl::StrCat("gives ", steps, " steps for ", run,
                                      ": too few for a decay phase; raise the "
                                      "budget"));
        }
        const auto [it, inserted] = by_tokens.emplace(tokens, b);
        if (!inserted) {
          return Bad(at,
                     absl::StrCat("rounds to ", tokens, " tokens for ", run,
                                  ", the same as budget ", it->second,
                                  "; use budgets at least one batch apart"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSweepSpec(const SweepSpec& raw) {
  const SweepSpec spec = WithDefaults(raw);
  HLAB_RETURN_IF_ERROR(CheckTopLevel(spec));
  HLAB_RETURN_IF_ERROR(CheckGrid(spec));
  HLAB_RETURN_IF_ERROR(CheckData(spec));
  HLAB_RETURN_IF_ERROR(CheckSchedule(spec));
  HLAB_RETURN_IF_ERROR(CheckEvaluation(spec));
  HLAB_RETURN_IF_ERROR(CheckResourcesAndRetry(spec));
  HLAB_RETURN_IF_ERROR(CheckFit(spec));
  return CheckModelsAndBudgets(spec);
}

}  // namespace hlab::sweep
