#include "coordinator/sweep/internal/grid_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/sweep/limits.h"
#include "coordinator/sweep/run_config.h"
#include "model/config/param_count.h"

namespace hlab::sweep::internal {

using hlab::v1::SweepSpec;

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

absl::Status CheckName(const std::string& field, const std::string& name) {
  if (name.size() <= kMaxNameLength) return absl::OkStatus();
  return Bad(field, absl::StrCat(name.size(), " characters, over the limit of ",
                                 kMaxNameLength, "; use a shorter name"));
}

namespace {

absl::Status CheckBudgets(const hlab::v1::Budgets& b,
                          const std::string& field) {
  if (b.tokens_per_param().empty() && b.tokens().empty()) {
    return Bad(field, "empty; give tokens_per_param (D/N ratios) or tokens");
  }
  if (!b.tokens_per_param().empty() && !b.tokens().empty()) {
    return Bad(field + ".tokens",
               "give either tokens_per_param or tokens, not both");
  }
  HLAB_RETURN_IF_ERROR(AtMost(field + ".tokens_per_param",
                              b.tokens_per_param_size(), kMaxBudgets,
                              "budgets"));
  HLAB_RETURN_IF_ERROR(
      AtMost(field + ".tokens", b.tokens_size(), kMaxBudgets, "budgets"));
  std::set<double> ratios;
  for (int i = 0; i < b.tokens_per_param_size(); ++i) {
    const std::string at = Index(field + ".tokens_per_param", i);
    if (!(b.tokens_per_param(i) > 0)) {
      return Bad(at, absl::StrCat("must be > 0, got ", b.tokens_per_param(i)));
    }
    HLAB_RETURN_IF_ERROR(AtMost(at, b.tokens_per_param(i), kMaxTokensPerParam));
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
    HLAB_RETURN_IF_ERROR(AtMost(at, b.tokens(i), kMaxTokensPerRun, "tokens"));
    if (!tokens.insert(b.tokens(i)).second) {
      return Bad(at, "duplicate budget; budgets must be unique");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGrid(const SweepSpec& spec) {
  if (spec.architectures().empty()) {
    return Bad("architectures",
               "empty; list at least one, e.g. [full, swa-128]");
  }
  HLAB_RETURN_IF_ERROR(AtMost("architectures", spec.architectures_size(),
                              kMaxArchitectures, "architectures"));
  HLAB_RETURN_IF_ERROR(
      AtMost("scales", spec.scales_size(), kMaxScales, "scales"));
  std::set<std::string> archs;
  for (int i = 0; i < spec.architectures_size(); ++i) {
    const auto& a = spec.architectures(i);
    if (a.name().empty())
      return Bad(Index("architectures", i) + ".name", "missing");
    HLAB_RETURN_IF_ERROR(
        CheckName(Index("architectures", i) + ".name", a.name()));
    HLAB_RETURN_IF_ERROR(AtMost(Index("architectures", i) + ".pattern",
                                a.pattern().size(), kMaxPatternLength,
                                "characters"));
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
    HLAB_RETURN_IF_ERROR(CheckName(at + ".name", s.name()));
    if (!scales.insert(s.name()).second) {
      return Bad(at + ".name", absl::StrCat("duplicate scale name '", s.name(),
                                            "'; scale names must be unique"));
    }
    if (s.d_model() <= 0) return Bad(at + ".d_model", "must be > 0");
    if (s.n_layers() <= 0) return Bad(at + ".n_layers", "must be > 0");
    if (s.n_heads() <= 0) return Bad(at + ".n_heads", "must be > 0");
    // Sizes before any arithmetic on them.
    HLAB_RETURN_IF_ERROR(AtMost(at + ".d_model", s.d_model(), kMaxDModel));
    HLAB_RETURN_IF_ERROR(AtMost(at + ".n_layers", s.n_layers(), kMaxLayers));
    HLAB_RETURN_IF_ERROR(AtMost(at + ".n_heads", s.n_heads(), kMaxHeads));
    HLAB_RETURN_IF_ERROR(AtMost(at + ".head_dim", s.head_dim(), kMaxHeadDim));
    HLAB_RETURN_IF_ERROR(
        AtMost(at + ".ffn_hidden", s.ffn_hidden(), kMaxFfnHidden));
    HLAB_RETURN_IF_ERROR(
        AtMost(at + ".vocab_size", s.vocab_size(), kMaxVocabSize));
    HLAB_RETURN_IF_ERROR(
        AtMost(at + ".batch_tokens", s.batch_tokens(), kMaxBatchTokens));
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
    if (s.has_rope_theta() &&
        !(s.rope_theta() > 0 && std::isfinite(s.rope_theta()))) {
      return Bad(
          at + ".rope_theta",
          absl::StrCat("must be a positive finite number, got ", s.rope_theta(),
                       "; leave it out for the "
                       "sweep's rope_theta"));
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
  // Each count is at most 64 here, so the product cannot overflow.
  int64_t runs = 0;
  for (const auto& s : spec.scales()) {
    const auto& own = s.budgets();
    const int64_t budgets =
        own.tokens_per_param_size() + own.tokens_size() > 0
            ? own.tokens_per_param_size() + own.tokens_size()
            : b.tokens_per_param_size() + b.tokens_size();
    runs += int64_t{spec.architectures_size()} * budgets *
            std::max(1, spec.seeds_size());
  }
  return AtMost("spec", runs, kMaxRuns,
                "runs (architectures x scales x budgets x seeds)");
}

absl::Status CheckModelsAndBudgets(const SweepSpec& sweep) {
  // Canonical config of each run at the first seed -> who produced it, to
  // catch two grid points that are the same run (e.g. `swa-16` and the
  // pattern "swa:16,full", or two scales with equal dimensions).
  std::map<std::string, std::string> runs;
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
        // Name the scale only when the architecture works at another one.
        bool works_elsewhere = false;
        for (const auto& other : sweep.scales()) {
          works_elsewhere =
              works_elsewhere || ResolveModel(spec, arch, other).ok();
        }
        return Bad(field, absl::StrCat("'", arch.name(), "'",
                                       works_elsewhere
                                           ? absl::StrCat(" at scale '",
                                                          scale.name(), "'")
                                           : "",
                                       ": ", model.status().message()));
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
        const std::string run = absl::StrCat(arch.name(), "/", scale.name());
        // D = ratio x N, before it is rounded into an integer.
        const double raw =
            ratio ? spec.budgets().tokens_per_param(b) * static_cast<double>(n)
                  : 0;
        if (raw > static_cast<double>(kMaxTokensPerRun)) {
          return Bad(
              at, absl::StrCat("gives ", raw, " tokens for ", run, " (N = ", n,
                               "), over the limit of ", kMaxTokensPerRun,
                               " tokens a run "
                               "(coordinator/sweep/limits.h)"));
        }
        const int64_t tokens = BudgetTokens(spec, b, n);
        const int64_t steps = tokens / spec.batch_tokens();
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
        const std::string config =
            CanonicalRunConfig(spec, *model, tokens, sweep.seeds(0));
        const std::string who = absl::StrCat("architecture '", arch.name(),
                                             "' at scale '", scale.name(), "'");
        const auto [same, fresh] = runs.emplace(config, who);
        if (!fresh && same->second != who) {
          return Bad(field, absl::StrCat(who, " is the same model and run as ",
                                         same->second,
                                         "; list each architecture and scale "
                                         "once"));
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

}  // namespace hlab::sweep::internal
