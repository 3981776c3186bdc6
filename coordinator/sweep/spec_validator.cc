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
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/internal/grid_checks.h"
#include "coordinator/sweep/limits.h"
#include "coordinator/sweep/run_config.h"
#include "coordinator/sweep/spec_defaults.h"
#include "eval/ruler/ruler.h"
#include "eval/ruler/ruler_tasks.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "task/eval_task.h"

namespace hlab::sweep {
namespace {

using hlab::v1::SweepSpec;
using internal::ArchitectureNames;
using internal::Bad;
using internal::Contains;
using internal::Index;
using internal::ScaleNames;

absl::Status CheckTopLevel(const SweepSpec& spec) {
  if (spec.name().empty()) {
    return Bad("name", "missing; give the sweep a name such as 'demo'");
  }
  HLAB_RETURN_IF_ERROR(internal::CheckName("name", spec.name()));
  if (spec.seq_len() == 0) {
    return Bad("seq_len", "missing; give the training sequence length");
  }
  if (spec.batch_tokens() == 0) {
    return Bad("batch_tokens",
               "missing; give the tokens per optimizer step (a multiple of "
               "seq_len)");
  }
  if (spec.seq_len() < 0) {
    return Bad("seq_len", absl::StrCat("must be > 0, got ", spec.seq_len()));
  }
  if (spec.batch_tokens() <= 0) {
    return Bad("batch_tokens",
               absl::StrCat("must be > 0, got ", spec.batch_tokens()));
  }
  HLAB_RETURN_IF_ERROR(internal::AtMost("seq_len", spec.seq_len(), kMaxSeqLen));
  HLAB_RETURN_IF_ERROR(
      internal::AtMost("batch_tokens", spec.batch_tokens(), kMaxBatchTokens));
  if (spec.batch_tokens() % spec.seq_len() != 0) {
    return Bad("batch_tokens",
               absl::StrCat("must be a multiple of seq_len = ", spec.seq_len(),
                            ", got ", spec.batch_tokens(),
                            "; use sequences-per-batch x seq_len"));
  }
  if (spec.has_rope_theta() &&
      !(spec.rope_theta() > 0 && std::isfinite(spec.rope_theta()))) {
    return Bad("rope_theta",
               absl::StrCat("must be a positive finite number, got ",
                            spec.rope_theta(), "; 10000 is the default"));
  }
  if (spec.priority() < -1000 || spec.priority() > 1000) {
    return Bad("priority",
               absl::StrCat("must be in [-1000, 1000], got ", spec.priority()));
  }
  HLAB_RETURN_IF_ERROR(
      internal::AtMost("seeds", spec.seeds_size(), kMaxSeeds, "seeds"));
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
  return absl::OkStatus();
}

absl::Status CheckSchedule(const SweepSpec& spec) {
  const auto& s = spec.schedule();
  if (s.peak_lr() == 0) {
    return Bad("schedule.peak_lr", "missing; give the stable learning rate");
  }
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

// Bad naming `at` unless every architecture has a full-attention layer at
// every scale: the mechanism analyses trace what full attention carries.
absl::Status RequireFullAttention(const SweepSpec& spec, const std::string& at,
                                  const std::string& analysis) {
  for (const auto& arch : spec.architectures()) {
    const std::string& layers =
        arch.pattern().empty() ? arch.name() : arch.pattern();
    for (const auto& scale : spec.scales()) {
      absl::StatusOr<std::vector<hlab::model::MixerSpec>> mixers =
          hlab::model::ExpandArchitecture(layers, scale.n_layers());
      if (!mixers.ok()) continue;  // reported with the architecture
      if (std::none_of(mixers->begin(), mixers->end(),
                       [](const hlab::model::MixerSpec& m) {
                         return hlab::model::IsFullAttention(m.kind);
                       })) {
        return Bad(at,
                   absl::StrCat("architecture '", arch.name(),
                                "' has no full-attention layer at scale '",
                                scale.name(), "'; ", analysis,
                                ": remove the architecture or disable ", at));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckContextLength(const SweepSpec& spec, const std::string& at,
                                int64_t length) {
  if (length < 2 || length > spec.seq_len()) {
    return Bad(at, absl::StrCat("must be in [2, seq_len = ", spec.seq_len(),
                                "], got ", length));
  }
  return absl::OkStatus();
}

// evaluation.probing (defaults applied): counts in range, and a
// full-attention layer in every architecture at every scale.
absl::Status CheckProbing(const SweepSpec& spec) {
  const auto& p = spec.evaluation().probing();
  if (!p.enabled()) return absl::OkStatus();
  const std::string at = "evaluation.probing";
  if (p.classes() < 2 || p.classes() > 10) {
    return Bad(at + ".classes",
               absl::StrCat("must be in [2, 10] (the synthetic corpus's "
                            "values), got ",
                            p.classes()));
  }
  if (p.samples() < 2 * p.classes() || p.samples() > 100000) {
    return Bad(at + ".samples",
               absl::StrCat("must be in [2 x classes = ", 2 * p.classes(),
                            ", 100000], got ", p.samples()));
  }
  HLAB_RETURN_IF_ERROR(
      CheckContextLength(spec, at + ".context_length", p.context_length()));
  return RequireFullAttention(
      spec, at,
      "layer-wise probing traces how full attention carries retrieval");
}

// evaluation.retrieval_heads (defaults applied), as probing.
absl::Status CheckRetrievalHeads(const SweepSpec& spec) {
  const auto& r = spec.evaluation().retrieval_heads();
  if (!r.enabled()) return absl::OkStatus();
  const std::string at = "evaluation.retrieval_heads";
  if (r.samples() < 1 || r.samples() > 100000) {
    return Bad(at + ".samples",
               absl::StrCat("must be in [1, 100000], got ", r.samples()));
  }
  if (r.top_heads() < 1) {
    return Bad(at + ".top_heads",
               absl::StrCat("must be >= 1, got ", r.top_heads()));
  }
  HLAB_RETURN_IF_ERROR(
      CheckContextLength(spec, at + ".context_length", r.context_length()));
  return RequireFullAttention(
      spec, at, "retrieval-head tracing scores full-attention heads");
}

// evaluation.multiple_choice, when enabled (CheckMultipleChoiceTasks).
absl::Status CheckMultipleChoice(const SweepSpec& spec) {
  const auto& m = spec.evaluation().multiple_choice();
  if (!m.enabled()) return absl::OkStatus();
  return CheckMultipleChoiceTasks(m, "evaluation.multiple_choice");
}

// evaluation.ruler (defaults applied): known tasks, each once, with the
// files they need; lengths within seq_len; counts in range.
absl::Status CheckRuler(const SweepSpec& spec) {
  const auto& r = spec.evaluation().ruler();
  if (!r.enabled()) return absl::OkStatus();
  const std::string at = "evaluation.ruler";
  // The evaluation's own checks (task names, each once; counts), named
  // under the spec's section.
  eval::ruler::RulerConfig config;
  config.tasks.assign(r.tasks().begin(), r.tasks().end());
  config.lengths.assign(r.lengths().begin(), r.lengths().end());
  config.samples = r.samples();
  config.tokens_to_generate = r.tokens_to_generate();
  if (absl::Status s = eval::ruler::ValidateRulerConfig(config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".", s.message()));
  }
  // What only the spec knows: the files a named task needs, seq_len, and
  // the sweep's bounds.
  const std::map<std::string, std::string> files = {
      {"essay", r.essay_file()},
      {"squad", r.squad_file()},
      {"hotpotqa", r.hotpotqa_file()}};
  for (int i = 0; i < r.tasks_size(); ++i) {
    const eval::ruler::RulerTaskInfo t =
        *eval::ruler::FindRulerTask(r.tasks(i));
    if (!t.needs.empty() && files.at(t.needs).empty()) {
      return Bad(Index(at + ".tasks", i),
                 absl::StrCat(t.name, " needs ", at, ".", t.needs,
                              "_file (a file on the workers)"));
    }
  }
  HLAB_RETURN_IF_ERROR(internal::AtMost(at + ".lengths", r.lengths_size(),
                                        kMaxEvalPoints, "lengths"));
  for (int i = 0; i < r.lengths_size(); ++i) {
    HLAB_RETURN_IF_ERROR(
        CheckContextLength(spec, Index(at + ".lengths", i), r.lengths(i)));
  }
  if (r.samples() > 100000) {
    return Bad(at + ".samples",
               absl::StrCat("must be in [1, 100000], got ", r.samples()));
  }
  return absl::OkStatus();
}

// evaluation.trajectory: K >= 0; its evals enabled, known, each once; some
// evaluation enabled when K > 0. (How many EVAL tasks K makes is checked
// when the plan is made: expand.cc.)
absl::Status CheckTrajectory(const SweepSpec& spec) {
  const auto& t = spec.evaluation().trajectory();
  const std::string at = "evaluation.trajectory";
  if (t.every_steps() < 0) {
    return Bad(at + ".every_steps",
               absl::StrCat("must be >= 0, got ", t.every_steps()));
  }
  const std::vector<std::string> enabled = EnabledEvals(spec);
  if (t.every_steps() > 0 && enabled.empty()) {
    return Bad(at + ".every_steps",
               "no evaluation is enabled; enable one (e.g. "
               "evaluation.retrieval_heads.enabled: true)");
  }
  HLAB_RETURN_IF_ERROR(internal::AtMost(at + ".evals", t.evals_size(),
                                        kMaxEvalPoints, "evaluations"));
  std::set<std::string> seen;
  for (int i = 0; i < t.evals_size(); ++i) {
    const std::string& name = t.evals(i);
    if (!Contains(task::AllEvalNames(), name)) {
      return Bad(Index(at + ".evals", i),
                 absl::StrCat("unknown evaluation '", name, "' (one of ",
                              absl::StrJoin(task::AllEvalNames(), ", "), ")"));
    }
    if (!Contains(enabled, name)) {
      return Bad(Index(at + ".evals", i),
                 absl::StrCat("'", name,
                              "' is not enabled in the evaluation section; "
                              "enable it there (the trajectory uses its "
                              "settings) or leave it out"));
    }
    if (!seen.insert(name).second) {
      return Bad(Index(at + ".evals", i),
                 absl::StrCat("'", name, "' is named twice"));
    }
  }
  if (t.evals_size() > 0 && t.every_steps() == 0) {
    return Bad(at + ".evals", "needs every_steps > 0");
  }
  if (t.evals_size() > 0 && seen.count("receptive_field") > 0 &&
      seen.count("val_loss") == 0) {
    return Bad(at + ".evals",
               "receptive_field needs val_loss named too (its results are "
               "the changes against the unrestricted loss)");
  }
  return absl::OkStatus();
}

absl::Status CheckEvaluation(const SweepSpec& spec) {
  const auto& e = spec.evaluation();
  if (e.validation_loss().tokens() < 0) {
    return Bad("evaluation.validation_loss.tokens", "must be >= 0");
  }
  if (!e.validation_loss().documents().empty() &&
      !task::ValidValLossDocuments(e.validation_loss().documents())) {
    return Bad("evaluation.validation_loss.documents",
               absl::StrCat("must be mixture, short or long, got '",
                            e.validation_loss().documents(), "'"));
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
    const int kinds =
        (r.run_id().empty() ? 0 : 1) + (r.checkpoint_path().empty() ? 0 : 1) +
        (r.hf_dir().empty() ? 0 : 1) + (r.architecture().empty() ? 0 : 1);
    if (kinds > 1) {
      return Bad(lp + ".reference",
                 "give one of architecture/scale, run_id, checkpoint_path or "
                 "hf_dir");
    }
    const auto& k = l.key_tokens();
    if (!k.file().empty() || !k.slices().empty() || !k.texts().empty() ||
        !k.tokenizer().empty()) {
      if (kinds > 0) {
        return Bad(lp + ".reference",
                   "not used with key_tokens (the key tokens are chosen "
                   "already): drop one of them");
      }
      if (!k.file().empty() && (!k.slices().empty() || !k.texts().empty())) {
        return Bad(lp + ".key_tokens",
                   "give file (hlab's key-span JSONL), or slices with texts "
                   "(PKU-ML/LongPPL's files), not both");
      }
      if (k.file().empty() && k.slices().empty()) {
        return Bad(lp + ".key_tokens",
                   "needs file, or slices with texts (docs/evaluation.md, "
                   "\"Key tokens from another tool\")");
      }
      if (!k.slices().empty() && k.texts().empty()) {
        return Bad(lp + ".key_tokens.texts",
                   "is required with slices (a JSONL of the texts, "
                   "{\"text\": ...} a line, in slice order)");
      }
    }
    if (!l.aggregation().empty() && l.aggregation() != "pooled" &&
        l.aggregation() != "per_document") {
      return Bad(lp + ".aggregation",
                 absl::StrCat("must be pooled or per_document, got '",
                              l.aggregation(), "'"));
    }
    if (!r.dtype().empty() && r.hf_dir().empty()) {
      return Bad(lp + ".reference.dtype",
                 "only with hf_dir (an hlab checkpoint runs in its own dtype)");
    }
    if (!r.dtype().empty() && r.dtype() != "fp32" && r.dtype() != "bf16") {
      return Bad(lp + ".reference.dtype",
                 absl::StrCat("must be fp32 or bf16, got '", r.dtype(), "'"));
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
    if (l.min_key_tokens() < 1) {
      return Bad(lp + ".min_key_tokens", "must be >= 1");
    }
    if (l.context_len() > spec.seq_len()) {
      return Bad(lp + ".context_len",
                 absl::StrCat("must be <= seq_len = ", spec.seq_len()));
    }
  }
  const auto& n = e.niah();
  HLAB_RETURN_IF_ERROR(internal::AtMost("evaluation.niah.context_lengths",
                                        n.context_lengths_size(),
                                        kMaxEvalPoints, "lengths"));
  HLAB_RETURN_IF_ERROR(internal::AtMost(
      "evaluation.niah.depths", n.depths_size(), kMaxEvalPoints, "depths"));
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
  if (n.enabled() && n.haystack() != "synthetic" && n.haystack() != "noise") {
    return Bad(
        "evaluation.niah.haystack",
        absl::StrCat("must be synthetic or noise, got '", n.haystack(), "'"));
  }
  if (n.enabled() && n.haystack() == "synthetic" &&
      spec.data().source() != "synthetic") {
    return Bad("evaluation.niah.haystack",
               "synthetic needs data.source synthetic (its needles are the "
               "built-in corpus's binding tokens); use noise");
  }
  const auto& gp = e.gradient_profile();
  if (gp.enabled() && (gp.sequences() < 1 || gp.sequences() > 100000)) {
    return Bad("evaluation.gradient_profile.sequences",
               absl::StrCat("must be in [1, 100000], got ", gp.sequences()));
  }
  HLAB_RETURN_IF_ERROR(CheckProbing(spec));
  HLAB_RETURN_IF_ERROR(CheckRetrievalHeads(spec));
  HLAB_RETURN_IF_ERROR(CheckMultipleChoice(spec));
  HLAB_RETURN_IF_ERROR(CheckRuler(spec));
  HLAB_RETURN_IF_ERROR(CheckTrajectory(spec));
  const int64_t q_every = spec.analysis().q_grad_every_steps();
  if (q_every < 0) {
    return Bad("analysis.q_grad_every_steps",
               absl::StrCat("must be >= 0, got ", q_every));
  }
  if (q_every > 0) {
    HLAB_RETURN_IF_ERROR(RequireFullAttention(
        spec, "analysis.q_grad_every_steps",
        "the hook logs full-attention heads' q_proj gradients"));
  }
  const auto& rf = e.receptive_field();
  if (rf.enabled()) {
    if (rf.limit() < 2 || rf.limit() % 2 != 0 || rf.limit() >= spec.seq_len()) {
      return Bad("evaluation.receptive_field.limit",
                 absl::StrCat("must be even and in [2, seq_len = ",
                              spec.seq_len(), "), got ", rf.limit()));
    }
    if (!e.validation_loss().enabled()) {
      return Bad("evaluation.receptive_field",
                 "needs validation_loss enabled (its results are the changes "
                 "against the unrestricted loss)");
    }
  }
  return absl::OkStatus();
}

// cpu_ranks: >= 1 (0 = 1), CPU tasks only; and every step's sequences
// split evenly across the ranks (cpu_ranks, or one per GPU) at the scale's
// batch size.
absl::Status CheckCpuRanks(const SweepSpec& spec,
                           const hlab::v1::ScaleResources& r,
                           const std::string& at) {
  if (r.cpu_ranks() < 0) {
    return Bad(
        at + ".cpu_ranks",
        absl::StrCat("must be >= 1 (0: one process), got ", r.cpu_ranks()));
  }
  if (r.cpu_ranks() > 1 && r.gpus() > 0) {
    return Bad(at + ".cpu_ranks",
               "only for CPU tasks (gpus = 0); a GPU task runs one rank per "
               "GPU");
  }
  const int ranks = r.gpus() > 0 ? r.gpus() : r.cpu_ranks();
  if (ranks <= 1) return absl::OkStatus();
  const std::string field = r.gpus() > 0 ? ".gpus" : ".cpu_ranks";
  int64_t batch_tokens = spec.batch_tokens();
  for (const auto& scale : spec.scales()) {
    if (scale.name() == r.scale() && scale.batch_tokens() > 0) {
      batch_tokens = scale.batch_tokens();
    }
  }
  const int64_t sequences = batch_tokens / spec.seq_len();
  if (sequences % ranks != 0) {
    return Bad(
        at + field,
        absl::StrCat(ranks, " ranks do not divide the ", sequences,
                     " sequences of a step (batch_tokens ", batch_tokens,
                     " / seq_len ", spec.seq_len(), ") of scale '", r.scale(),
                     "'; use a divisor or change batch_tokens"));
  }
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
    HLAB_RETURN_IF_ERROR(CheckCpuRanks(spec, r, at));
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

// Early stop and the adaptive order need laws to predict from, so a `fit`
// section as written (checked before the defaults, which add one to every
// spec); `spec` is the spec with its defaults, for the scale names.
absl::Status CheckAdaptive(const SweepSpec& raw, const SweepSpec& spec) {
  if (raw.adaptive().has_stop_when()) {
    if (!raw.has_fit()) {
      return Bad("adaptive.stop_when",
                 "needs a fit section: early stop uses the predictions of the "
                 "sweep's fitted laws; add `fit: {}` (or your fit scales)");
    }
    const double x = raw.adaptive().stop_when().interval_below();
    if (!std::isfinite(x) || x <= 0) {
      return Bad("adaptive.stop_when.interval_below",
                 absl::StrCat("must be > 0 and finite, got ", x,
                              "; the width of the 95% prediction interval, in "
                              "the first fit target's units"));
    }
  }
  const std::string& policy = raw.schedule_policy();
  if (!policy.empty() && policy != "default" && policy != "adaptive") {
    return Bad("schedule_policy", absl::StrCat("unknown policy '", policy,
                                               "'; use default or adaptive"));
  }
  if (policy != "adaptive") {
    if (raw.adaptive().has_target()) {
      return Bad("adaptive.target",
                 "only used by schedule_policy: adaptive; add it, or remove "
                 "the target region");
    }
    return absl::OkStatus();
  }
  if (!raw.has_fit()) {
    return Bad("schedule_policy",
               "adaptive needs a fit section: the order ranks runs by how "
               "much they narrow the fitted laws' predictions; add `fit: "
               "{verify_scales: [...]}`");
  }
  const hlab::v1::TargetRegion& target = spec.adaptive().target();
  const std::vector<std::string> scales = ScaleNames(spec);
  std::set<std::string> seen;
  for (int i = 0; i < target.scales_size(); ++i) {
    const std::string at = Index("adaptive.target.scales", i);
    if (!Contains(scales, target.scales(i))) {
      return Bad(at,
                 absl::StrCat("unknown scale '", target.scales(i),
                              "' (scales: ", absl::StrJoin(scales, ", "), ")"));
    }
    if (!seen.insert(target.scales(i)).second) {
      return Bad(at, "duplicate scale");
    }
  }
  if (target.scales().empty() && spec.fit().verify_scales().empty()) {
    return Bad("adaptive.target.scales",
               "missing: the adaptive order's target region defaults to "
               "fit.verify_scales, and there are none; name the scales whose "
               "predictions matter, or set fit.verify_scales");
  }
  if (target.has_largest_budgets() && target.largest_budgets() < 1) {
    return Bad("adaptive.target.largest_budgets",
               absl::StrCat("must be >= 1, got ", target.largest_budgets()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMultipleChoiceTasks(const hlab::v1::MultipleChoiceSpec& spec,
                                      const std::string& at) {
  HLAB_RETURN_IF_ERROR(internal::AtMost(at + ".tasks", spec.tasks_size(),
                                        kMaxEvalPoints, "tasks"));
  return task::ValidateMultipleChoice(MultipleChoiceSettings(spec), at);
}

absl::Status ValidateSweepSpec(const SweepSpec& raw) {
  const SweepSpec spec = WithDefaults(raw);
  HLAB_RETURN_IF_ERROR(CheckTopLevel(spec));
  HLAB_RETURN_IF_ERROR(internal::CheckGrid(spec));
  HLAB_RETURN_IF_ERROR(CheckData(spec));
  HLAB_RETURN_IF_ERROR(CheckSchedule(spec));
  HLAB_RETURN_IF_ERROR(CheckEvaluation(spec));
  HLAB_RETURN_IF_ERROR(CheckResourcesAndRetry(spec));
  HLAB_RETURN_IF_ERROR(CheckFit(spec));
  HLAB_RETURN_IF_ERROR(CheckAdaptive(raw, spec));
  return internal::CheckModelsAndBudgets(spec);
}

}  // namespace hlab::sweep
