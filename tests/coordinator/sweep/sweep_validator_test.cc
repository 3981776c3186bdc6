// Bad sweep specs: each kind gets INVALID_ARGUMENT naming the field.
#include <cctype>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"
#include "coordinator/sweep/spec_validator.h"

namespace hlab::sweep {
namespace {

// A small valid spec as top-level YAML entries; each case replaces, adds or
// (with an empty value) removes one entry.
std::vector<std::pair<std::string, std::string>> BaseEntries() {
  return {
      {"name", "t"},
      {"architectures", "[full, swa-16]"},
      {"scales",
       "[{name: A, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2}, "
       "{name: B, d_model: 48, n_layers: 2, n_heads: 4, n_kv_heads: 2}]"},
      {"budgets", "{tokens_per_param: [5, 10]}"},
      {"seq_len", "64"},
      {"batch_tokens", "256"},
      {"schedule", "{peak_lr: 1.0e-3, warmup_steps: 5}"},
      {"fit", "{fit_scales: [A], verify_scales: [B]}"},
  };
}

// The base spec with `key` set to `value` (removed if empty). Further
// lines of `value` ("other: v") set more entries the same way.
std::string SpecText(const std::string& key, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> entries = BaseEntries();
  std::vector<std::pair<std::string, std::string>> changes;
  const size_t newline = value.find('\n');
  changes.emplace_back(key, value.substr(0, newline));
  for (size_t at = newline; at != std::string::npos;) {
    const size_t next = value.find('\n', at + 1);
    const std::string line = value.substr(at + 1, next - at - 1);
    const size_t colon = line.find(": ");
    changes.emplace_back(line.substr(0, colon), line.substr(colon + 2));
    at = next;
  }
  for (const auto& [k, v] : changes) {
    if (k.empty()) continue;
    bool found = false;
    for (auto& entry : entries) {
      if (entry.first == k) {
        entry.second = v;
        found = true;
      }
    }
    if (!found) entries.emplace_back(k, v);
  }
  std::string text;
  for (const auto& [k, v] : entries) {
    if (!v.empty()) text += k + ": " + v + "\n";
  }
  return text;
}

// Parses and plans; returns the first error.
absl::Status Check(const std::string& text) {
  absl::StatusOr<hlab::v1::SweepSpec> spec = ParseSweepSpec(text);
  if (!spec.ok()) return spec.status();
  return PlanSweep(*spec).status();
}

TEST(SweepValidatorTest, BaseSpecIsValid) {
  const absl::Status status = Check(SpecText("", ""));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SweepValidatorTest, EarlyStopWithAFitSectionIsValid) {
  const absl::Status status =
      Check(SpecText("adaptive", "{stop_when: {interval_below: 0.05}}"));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SweepValidatorTest, AdaptiveOrderWithItsDefaultTargetIsValid) {
  // The target region defaults to fit.verify_scales (B).
  absl::Status status = Check(SpecText("schedule_policy", "adaptive"));
  EXPECT_TRUE(status.ok()) << status;
  status =
      Check(SpecText("schedule_policy",
                     "adaptive\nadaptive: {target: {scales: [A, B], "
                     "largest_budgets: 2}, stop_when: {interval_below: 0.1}}"));
  EXPECT_TRUE(status.ok()) << status;
  status = Check(SpecText("schedule_policy", "default"));
  EXPECT_TRUE(status.ok()) << status;
}

// Written or not, the default order is the same sweep: the same hash, the
// same runs; the adaptive order is another sweep of the same runs, whose
// trunks train in segments (docs/sweeps.md, "Trunk segments"): the same
// DECAY and EVAL tasks, and TRUNK tasks that cover the same steps.
TEST(SweepValidatorTest, ScheduleDefaultIsTheSameSweepAdaptiveTheSameRuns) {
  auto plan = [](const std::string& text) {
    absl::StatusOr<hlab::v1::SweepSpec> spec = ParseSweepSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<SweepPlan> p = PlanSweep(*spec);
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  };
  const SweepPlan base = plan(SpecText("", ""));
  const SweepPlan written = plan(SpecText("schedule_policy", "default"));
  const SweepPlan adaptive = plan(SpecText("schedule_policy", "adaptive"));
  EXPECT_EQ(written.spec_hash, base.spec_hash);
  EXPECT_NE(adaptive.spec_hash, base.spec_hash);
  ASSERT_EQ(adaptive.runs.size(), base.runs.size());
  for (size_t i = 0; i < base.runs.size(); ++i) {
    EXPECT_EQ(adaptive.runs[i].run_id(), base.runs[i].run_id());
  }
  auto others = [](const SweepPlan& p) {
    std::vector<std::string> ids;
    for (const auto& t : p.tasks) {
      if (t.kind() != hlab::v1::TASK_KIND_TRUNK) ids.push_back(t.task_id());
    }
    return ids;
  };
  auto trunk_steps = [](const SweepPlan& p, int* tasks) {
    int64_t steps = 0;
    *tasks = 0;
    for (const auto& t : p.tasks) {
      if (t.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
      steps += t.end_step() - t.start_step();
      ++*tasks;
    }
    return steps;
  };
  EXPECT_EQ(others(adaptive), others(base));
  int base_trunks = 0, segments = 0;
  EXPECT_EQ(trunk_steps(adaptive, &segments), trunk_steps(base, &base_trunks));
  EXPECT_GT(segments, base_trunks);
}

// A spec built in code (not parsed) can carry NaN; the validator refuses it.
TEST(SweepValidatorTest, EarlyStopWithNanIntervalIsRefused) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      ParseSweepSpec(SpecText("adaptive", "{stop_when: {interval_below: 1}}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->mutable_adaptive()->mutable_stop_when()->set_interval_below(
      std::numeric_limits<double>::quiet_NaN());
  const absl::Status status = ValidateSweepSpec(*spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message())
                .find("adaptive.stop_when.interval_below: must be > 0 and "
                      "finite, got nan"),
            std::string::npos)
      << status;
}

TEST(SweepValidatorTest, CpuRanksThatDivideTheBatchAreValid) {
  // 4 sequences a step: 2 ranks at A's batch; B's own batch of 8 for 4.
  const absl::Status status =
      Check(SpecText("resources",
                     "[{scale: A, cpu_ranks: 2}, {scale: B, cpu_ranks: 4}]\n"
                     "scales: [{name: A, d_model: 32, n_layers: 2, n_heads: 4, "
                     "n_kv_heads: 2}, {name: B, d_model: 48, n_layers: 2, "
                     "n_heads: 4, n_kv_heads: 2, batch_tokens: 512}]"));
  EXPECT_TRUE(status.ok()) << status;
}

struct BadSpec {
  const char* kind;
  std::string key;
  std::string value;
  std::string field;  // must appear in the message
};

// Test names print the kind, not the bytes of the struct.
void PrintTo(const BadSpec& c, std::ostream* os) { *os << c.kind; }

class BadSpecTest : public testing::TestWithParam<BadSpec> {};

TEST_P(BadSpecTest, IsInvalidArgumentNamingTheField) {
  const BadSpec& c = GetParam();
  const absl::Status status = Check(SpecText(c.key, c.value));
  ASSERT_FALSE(status.ok()) << c.kind << ": accepted";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find(c.field), std::string::npos)
      << c.kind << ": '" << status.message() << "' should name " << c.field;
}

const char kScales[] = "{name: A, d_model: 32, n_layers: 2, n_heads: 4";

INSTANTIATE_TEST_SUITE_P(
    Kinds, BadSpecTest,
    testing::Values(
        BadSpec{"unknown architecture", "architectures", "[full, lstm]",
                "architectures[1].name: 'lstm': architecture 'lstm': unknown "
                "name"},
        BadSpec{"bad custom pattern", "architectures",
                "[full, {name: mine, pattern: 'foo,full'}]",
                "architectures[1].pattern"},
        BadSpec{"no architectures", "architectures", "[]", "architectures"},
        BadSpec{"duplicate architecture", "architectures", "[full, full]",
                "architectures[1].name: duplicate architecture 'full'"},
        BadSpec{"no scales", "scales", "[]", "scales: empty"},
        BadSpec{"duplicate scale", "scales",
                std::string("[") + kScales + "}, " + kScales + "}]",
                "scales[1].name: duplicate scale name 'A'"},
        BadSpec{"no budgets", "budgets", "{}", "budgets: empty"},
        BadSpec{"odd receptive-field limit", "evaluation",
                "{receptive_field: {enabled: true, limit: 7}}",
                "evaluation.receptive_field.limit: must be even and in [2, "
                "seq_len = 64), got 7"},
        BadSpec{"receptive-field limit at the context", "evaluation",
                "{receptive_field: {enabled: true, limit: 64}}",
                "evaluation.receptive_field.limit"},
        BadSpec{"negative gradient-profile sequences", "evaluation",
                "{gradient_profile: {enabled: true, sequences: -1}}",
                "evaluation.gradient_profile.sequences: must be in [1, "
                "100000], got -1"},
        BadSpec{"probing classes above the corpus's values", "evaluation",
                "{probing: {enabled: true, classes: 11}}",
                "evaluation.probing.classes: must be in [2, 10]"},
        BadSpec{"too few probing samples", "evaluation",
                "{probing: {enabled: true, samples: 10}}",
                "evaluation.probing.samples: must be in [2 x classes = 16"},
        BadSpec{"probing beyond the context", "evaluation",
                "{probing: {enabled: true, context_length: 65}}",
                "evaluation.probing.context_length: must be in [2, seq_len "
                "= 64], got 65"},
        BadSpec{"probing a model without full attention", "architectures",
                "[full, {name: local, pattern: 'swa:16'}]\n"
                "evaluation: {probing: {enabled: true}}",
                "evaluation.probing: architecture 'local' has no "
                "full-attention layer at scale 'A'"},
        BadSpec{"no retrieval heads to report", "evaluation",
                "{retrieval_heads: {enabled: true, top_heads: -1}}",
                "evaluation.retrieval_heads.top_heads: must be >= 1"},
        BadSpec{"multiple choice without tasks", "evaluation",
                "{multiple_choice: {enabled: true}}",
                "evaluation.multiple_choice.tasks: must list at least one "
                "task"},
        BadSpec{"a multiple-choice task without a file", "evaluation",
                "{multiple_choice: {enabled: true, tasks: [{name: a}]}}",
                "evaluation.multiple_choice.tasks[0].file: is required"},
        BadSpec{
            "two multiple-choice tasks of one name", "evaluation",
            "{multiple_choice: {enabled: true, tasks: [{file: /d/arc.jsonl}, "
            "{file: /e/arc.test.jsonl}]}}",
            "evaluation.multiple_choice.tasks[1].name: 'arc' names two "
            "tasks"},
        BadSpec{"few-shot examples from nowhere", "evaluation",
                "{multiple_choice: {enabled: true, tasks: [{file: /d/q.jsonl, "
                "num_fewshot: 3}]}}",
                "evaluation.multiple_choice.tasks[0].fewshot_file: is "
                "required with num_fewshot > 0"},
        BadSpec{"retrieval heads beyond the context", "evaluation",
                "{retrieval_heads: {enabled: true, context_length: 65}}",
                "evaluation.retrieval_heads.context_length: must be in [2, "
                "seq_len = 64], got 65"},
        BadSpec{"retrieval heads of a model without full attention",
                "architectures",
                "[full, {name: local, pattern: 'swa:16'}]\n"
                "evaluation: {retrieval_heads: {enabled: true}}",
                "evaluation.retrieval_heads: architecture 'local' has no "
                "full-attention layer at scale 'A'"},
        BadSpec{"an unknown RULER task", "evaluation",
                "{ruler: {enabled: true, tasks: [vt, niah_single_9]}}",
                "evaluation.ruler.tasks[1]: unknown RULER task "
                "\"niah_single_9\""},
        BadSpec{"a RULER task named twice", "evaluation",
                "{ruler: {enabled: true, tasks: [vt, vt]}}",
                "evaluation.ruler.tasks[1]: \"vt\" is listed twice"},
        BadSpec{"a RULER task without its file", "evaluation",
                "{ruler: {enabled: true, tasks: [vt, qa_1]}}",
                "evaluation.ruler.tasks[1]: qa_1 needs "
                "evaluation.ruler.squad_file"},
        BadSpec{"a RULER length beyond the context", "evaluation",
                "{ruler: {enabled: true, lengths: [64, 65]}}",
                "evaluation.ruler.lengths[1]: must be in [2, seq_len = 64], "
                "got 65"},
        BadSpec{"negative RULER generation", "evaluation",
                "{ruler: {enabled: true, tokens_to_generate: -1}}",
                "evaluation.ruler.tokens_to_generate: must be >= 0"},
        BadSpec{"a q-gradient hook without full attention", "architectures",
                "[{name: local, pattern: 'swa:16'}]\n"
                "analysis: {q_grad_every_steps: 10}",
                "analysis.q_grad_every_steps: architecture 'local' has no "
                "full-attention layer"},
        BadSpec{"negative trajectory interval", "evaluation",
                "{trajectory: {every_steps: -5}}",
                "evaluation.trajectory.every_steps: must be >= 0, got -5"},
        BadSpec{"a trajectory with nothing to evaluate", "evaluation",
                "{validation_loss: {enabled: false}, trajectory: "
                "{every_steps: 10}}",
                "evaluation.trajectory.every_steps: no evaluation is enabled"},
        BadSpec{"an unknown trajectory evaluation", "evaluation",
                "{trajectory: {every_steps: 10, evals: [perplexity]}}",
                "evaluation.trajectory.evals[0]: unknown evaluation "
                "'perplexity'"},
        BadSpec{"a trajectory evaluation not enabled", "evaluation",
                "{trajectory: {every_steps: 10, evals: [val_loss, probing]}}",
                "evaluation.trajectory.evals[1]: 'probing' is not enabled"},
        BadSpec{"a trajectory evaluation named twice", "evaluation",
                "{trajectory: {every_steps: 10, evals: [val_loss, val_loss]}}",
                "evaluation.trajectory.evals[1]: 'val_loss' is named twice"},
        BadSpec{"trajectory evaluations without an interval", "evaluation",
                "{trajectory: {evals: [val_loss]}}",
                "evaluation.trajectory.evals: needs every_steps > 0"},
        BadSpec{"a trajectory receptive field without the loss", "evaluation",
                "{receptive_field: {enabled: true}, trajectory: {every_steps: "
                "10, evals: [receptive_field]}}",
                "evaluation.trajectory.evals: receptive_field needs val_loss"},
        BadSpec{"trajectory evaluations past the limit", "evaluation",
                "{trajectory: {every_steps: 1}}\n"
                "budgets: {tokens_per_param: [5, 2000]}",
                "evaluation.trajectory.every_steps: "},
        BadSpec{"receptive field without the loss", "evaluation",
                "{validation_loss: {enabled: false}, receptive_field: "
                "{enabled: true}}",
                "evaluation.receptive_field: needs validation_loss"},
        BadSpec{"zero rope base", "rope_theta", "0",
                "rope_theta: must be a "
                "positive finite number, got 0"},
        BadSpec{"negative rope base", "rope_theta", "-10000", "rope_theta"},
        BadSpec{"infinite rope base", "rope_theta", ".inf", "rope_theta"},
        BadSpec{"not-a-number rope base", "rope_theta", ".nan", "rope_theta"},
        BadSpec{"zero rope base of a scale", "scales",
                std::string("[") + kScales +
                    ", rope_theta: 0}, {name: B, d_model: 48, n_layers: 2, "
                    "n_heads: 4}]",
                "scales[0].rope_theta: must be a positive finite number"},
        BadSpec{"zero budget", "budgets", "{tokens_per_param: [0, 10]}",
                "budgets.tokens_per_param[0]"},
        BadSpec{"negative budget", "budgets", "{tokens: [-512]}",
                "budgets.tokens[0]"},
        BadSpec{"duplicate budget", "budgets", "{tokens_per_param: [5, 5]}",
                "budgets.tokens_per_param[1]"},
        BadSpec{"budgets rounding to one", "budgets", "{tokens: [2560, 2600]}",
                "budgets.tokens[1]"},
        BadSpec{"both budget kinds", "budgets",
                "{tokens_per_param: [5], tokens: [2560]}", "budgets.tokens"},
        BadSpec{"malformed YAML", "budgets", "{tokens_per_param: [5, 10}",
                "line"},
        BadSpec{"window larger than seq_len", "architectures", "[swa-128]",
                "architectures[0].name: 'swa-128': layer 0 has window 128 > "
                "seq_len"},
        BadSpec{"unknown field", "learning_rate", "1e-3",
                "learning_rate: unknown field"},
        BadSpec{"wrong type", "seq_len", "sixty-four", "seq_len: expected"},
        BadSpec{"batch not a multiple of seq_len", "batch_tokens", "300",
                "batch_tokens: must be a multiple of seq_len"},
        BadSpec{"budget smaller than warmup", "schedule",
                "{peak_lr: 1.0e-3, warmup_steps: 100000}",
                "budgets.tokens_per_param[0]"},
        BadSpec{"bad decay shape", "schedule",
                "{peak_lr: 1.0e-3, decay_shape: exponential}",
                "schedule.decay_shape"},
        BadSpec{"decay fraction out of range", "schedule",
                "{peak_lr: 1.0e-3, decay_fraction: 1.0}",
                "schedule.decay_fraction"},
        BadSpec{"min_lr_ratio out of range", "schedule",
                "{peak_lr: 1.0e-3, min_lr_ratio: 1.5}",
                "schedule.min_lr_ratio"},
        BadSpec{"non-positive peak_lr", "schedule", "{peak_lr: -0.1}",
                "schedule.peak_lr"},
        BadSpec{"two warmups", "schedule",
                "{peak_lr: 1.0e-3, warmup_steps: 2, warmup_tokens: 512}",
                "schedule.warmup_tokens"},
        BadSpec{"n_heads not divisible by n_kv_heads", "scales",
                "[{name: A, d_model: 32, n_layers: 2, n_heads: 4, "
                "n_kv_heads: 3}]",
                "scales[0].n_kv_heads"},
        BadSpec{"d_model not heads x head_dim", "scales",
                "[{name: A, d_model: 30, n_layers: 2, n_heads: 4}]",
                "scales[0].head_dim"},
        BadSpec{"zero layers", "scales",
                "[{name: A, d_model: 32, n_layers: 0, n_heads: 4}]",
                "scales[0].n_layers"},
        BadSpec{"per-scale batch not a multiple", "scales",
                "[{name: A, d_model: 32, n_layers: 2, n_heads: 4, "
                "batch_tokens: 100}]",
                "scales[0].batch_tokens"},
        BadSpec{"fit scale unknown", "fit", "{fit_scales: [Z]}",
                "fit.fit_scales[0]: unknown scale 'Z'"},
        BadSpec{"verify scale also fitted", "fit",
                "{fit_scales: [A, B], verify_scales: [B]}",
                "fit.verify_scales[0]: scale 'B' is also a fit scale"},
        BadSpec{"unknown fit target", "fit", "{targets: [accuracy]}",
                "fit.targets[0]"},
        BadSpec{"long_fraction outside [0,1]", "data", "{long_fraction: 1.5}",
                "data.long_fraction"},
        BadSpec{"unknown data source", "data", "{source: web}", "data.source"},
        BadSpec{"prepared data without path", "data", "{source: prepared}",
                "data.path"},
        BadSpec{"priority out of range", "priority", "5000", "priority"},
        BadSpec{"negative retry limit", "retry", "{max_retries_per_sweep: -1}",
                "retry.max_retries_per_sweep"},
        BadSpec{"zero attempts", "retry", "{max_attempts_per_run: 0}",
                "retry.max_attempts_per_run"},
        BadSpec{"backoff max below base", "retry",
                "{backoff_base_seconds: 60, backoff_max_seconds: 1}",
                "retry.backoff_max_seconds"},
        BadSpec{"duplicate seeds", "seeds", "[1, 1]", "seeds[1]"},
        BadSpec{"negative seed", "seeds", "[-1]", "seeds[0]"},
        BadSpec{"resources for an unknown scale", "resources",
                "[{scale: Z, gpus: 1}]", "resources[0].scale"},
        BadSpec{"negative gpus", "resources", "[{scale: A, gpus: -1}]",
                "resources[0].gpus"},
        BadSpec{"longppl reference unknown architecture", "evaluation",
                "{longppl: {enabled: true, reference: {architecture: gdn}}}",
                "evaluation.longppl.reference.architecture"},
        BadSpec{"longppl reference unknown scale", "evaluation",
                "{longppl: {enabled: true, reference: {architecture: full, "
                "scale: Z}}}",
                "evaluation.longppl.reference.scale"},
        BadSpec{"longppl reference twice", "evaluation",
                "{longppl: {enabled: true, reference: {run_id: abc, "
                "checkpoint_path: /x}}}",
                "evaluation.longppl.reference"},
        BadSpec{"longppl reference hf_dir and a run", "evaluation",
                "{longppl: {enabled: true, reference: {run_id: abc, "
                "hf_dir: /models/llama}}}",
                "evaluation.longppl.reference: give one of"},
        BadSpec{"longppl reference dtype without hf_dir", "evaluation",
                "{longppl: {enabled: true, reference: {dtype: bf16}}}",
                "evaluation.longppl.reference.dtype: only with hf_dir"},
        BadSpec{"longppl reference dtype unknown", "evaluation",
                "{longppl: {enabled: true, reference: {hf_dir: /m, "
                "dtype: fp16}}}",
                "evaluation.longppl.reference.dtype: must be fp32 or bf16, "
                "got 'fp16'"},
        BadSpec{"longppl key tokens and a reference", "evaluation",
                "{longppl: {enabled: true, reference: {run_id: abc}, "
                "key_tokens: {file: /k.jsonl}}}",
                "evaluation.longppl.reference: not used with key_tokens"},
        BadSpec{"longppl key tokens file and slices", "evaluation",
                "{longppl: {enabled: true, key_tokens: {file: /k.jsonl, "
                "slices: /s, texts: /t}}}",
                "evaluation.longppl.key_tokens: give file"},
        BadSpec{"longppl key tokens slices without texts", "evaluation",
                "{longppl: {enabled: true, key_tokens: {slices: /s}}}",
                "evaluation.longppl.key_tokens.texts: is required"},
        BadSpec{"longppl key tokens with a tokenizer only", "evaluation",
                "{longppl: {enabled: true, key_tokens: {tokenizer: byte}}}",
                "evaluation.longppl.key_tokens: needs file"},
        BadSpec{"longppl aggregation unknown", "evaluation",
                "{longppl: {enabled: true, aggregation: mean}}",
                "evaluation.longppl.aggregation: must be pooled or "
                "per_document, got 'mean'"},
        BadSpec{"niah length beyond seq_len", "evaluation",
                "{niah: {enabled: true, context_lengths: [128]}}",
                "evaluation.niah.context_lengths[0]"},
        BadSpec{"niah unknown haystack", "evaluation",
                "{niah: {enabled: true, haystack: books}}",
                "evaluation.niah.haystack: must be synthetic or noise, got "
                "'books'"},
        BadSpec{"validation_loss documents unknown", "evaluation",
                "{validation_loss: {documents: shorts}}",
                "evaluation.validation_loss.documents: must be mixture, "
                "short or long, got 'shorts'"},
        BadSpec{"longppl min_key_tokens below 1", "evaluation",
                "{longppl: {enabled: true, min_key_tokens: -1}}",
                "evaluation.longppl.min_key_tokens: must be >= 1"},
        BadSpec{"branch-point evals without sharing", "evaluation",
                "{at_branch_points: true}\nshare_trunk: false",
                "evaluation.at_branch_points"},
        BadSpec{"pattern equal to a named architecture", "architectures",
                "[full, swa-16, {name: mine, pattern: 'swa:16,full'}]",
                "architectures[2].pattern: architecture 'mine' at scale 'A' "
                "is the same model and run as architecture 'swa-16'"},
        BadSpec{"two scales with equal dimensions", "scales",
                std::string("[") + kScales + "}, {name: B, d_model: 32, " +
                    "n_layers: 2, n_heads: 4}]",
                "at scale 'B' is the same model and run as"},
        BadSpec{"synthetic data with a path", "data",
                "{source: synthetic, path: /x}", "data.path"},
        BadSpec{"negative weight decay", "schedule",
                "{peak_lr: 1.0e-3, weight_decay: -0.1}",
                "schedule.weight_decay"},
        BadSpec{"zero grad clip", "schedule", "{peak_lr: 1.0e-3, grad_clip: 0}",
                "schedule.grad_clip"},
        BadSpec{"gpu memory without gpus", "resources",
                "[{scale: A, gpu_memory_bytes: 1000}]",
                "resources[0].gpu_memory_bytes"},
        BadSpec{"negative cpu threads", "resources",
                "[{scale: A, cpu_threads: -2}]", "resources[0].cpu_threads"},
        BadSpec{"negative cpu ranks", "resources",
                "[{scale: A, cpu_ranks: -1}]",
                "resources[0].cpu_ranks: must be >= 1"},
        BadSpec{"cpu ranks on a gpu task", "resources",
                "[{scale: A, gpus: 1, cpu_ranks: 2}]",
                "resources[0].cpu_ranks: only for CPU tasks"},
        BadSpec{"cpu ranks that do not divide the batch", "resources",
                "[{scale: A, cpu_ranks: 3}]",
                "resources[0].cpu_ranks: 3 ranks do not divide the 4 "
                "sequences"},
        BadSpec{"gpus that do not divide the batch", "resources",
                "[{scale: A, gpus: 3}]",
                "resources[0].gpus: 3 ranks do not divide the 4 sequences"},
        BadSpec{"resources twice for a scale", "resources",
                "[{scale: A, gpus: 1}, {scale: A, gpus: 2}]",
                "resources[1].scale: duplicate"},
        BadSpec{"longppl trunc_len not below the context", "evaluation",
                "{longppl: {enabled: true, trunc_len: 64}}",
                "evaluation.longppl.trunc_len"},
        BadSpec{"niah depth outside [0,1]", "evaluation",
                "{niah: {enabled: true, depths: [0.5, 1.5]}}",
                "evaluation.niah.depths[1]"},
        BadSpec{"longppl fit target without longppl", "fit",
                "{fit_scales: [A], targets: [loss, longppl]}",
                "fit.targets[1]: longppl needs"},
        BadSpec{"architecture invalid at one scale", "scales",
                std::string("[") + kScales +
                    "}, {name: B, d_model: 128, n_layers: 2, n_heads: 4}]\n"
                    "architectures: [full, mamba2]",
                "architectures[1].name: 'mamba2' at scale 'A': "
                "layers[0].ssm_head_dim"},
        BadSpec{"missing seq_len", "seq_len", "", "seq_len: missing"},
        BadSpec{"missing batch_tokens", "batch_tokens", "",
                "batch_tokens: missing"},
        BadSpec{"missing peak_lr", "schedule", "{warmup_steps: 5}",
                "schedule.peak_lr: missing"},
        BadSpec{"missing name", "name", "", "name: missing"}),
    [](const testing::TestParamInfo<BadSpec>& param_info) {
      std::string name;
      for (const char* p = param_info.param.kind; *p != '\0'; ++p) {
        name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
      }
      return name;
    });

// "[0, 1, ..., n - 1]".
std::string Seeds(int n) {
  std::string list = "[";
  for (int i = 0; i < n; ++i) list += (i > 0 ? ", " : "") + std::to_string(i);
  return list + "]";
}

// The input limits (coordinator/sweep/limits.h), and empty lists: each is
// refused naming the field and the limit, before any arithmetic overflows.
INSTANTIATE_TEST_SUITE_P(
    Limits, BadSpecTest,
    testing::Values(
        BadSpec{"d_model of 1e12", "scales",
                "[{name: A, d_model: 1e12, n_layers: 2, n_heads: 4, "
                "n_kv_heads: 2}]\nfit: {fit_scales: [A]}",
                "scales[0].d_model: 1000000000000 is over the limit of 65536"},
        BadSpec{"layers beyond the limit", "scales",
                "[{name: A, d_model: 32, n_layers: 5000, n_heads: 4}]\n"
                "fit: {fit_scales: [A]}",
                "scales[0].n_layers: 5000 is over the limit of 1024"},
        BadSpec{"vocabulary beyond the limit", "scales",
                "[{name: A, d_model: 32, n_layers: 2, n_heads: 4, "
                "vocab_size: 100000000}]\nfit: {fit_scales: [A]}",
                "scales[0].vocab_size: 100000000 is over the limit of "
                "16777216"},
        BadSpec{"tokens_per_param of 1e300", "budgets",
                "{tokens_per_param: [5, 1e300]}",
                "budgets.tokens_per_param[1]: 1e+300 is over the limit of "
                "1e+06"},
        BadSpec{"a token budget beyond the limit", "budgets",
                "{tokens: [1e16]}",
                "budgets.tokens[0]: 10000000000000000 tokens is over the "
                "limit of 1000000000000000"},
        BadSpec{"seq_len beyond the limit", "seq_len", "2000000",
                "seq_len: 2000000 is over the limit of 1048576"},
        BadSpec{"a name of 100000 characters", "name", std::string(100000, 'x'),
                "name: 100000 characters, over the limit of 128"},
        BadSpec{"a scale name too long", "scales",
                "[{name: " + std::string(200, 's') +
                    ", d_model: 32, n_layers: 2, n_heads: 4}]\n"
                    "fit: {fit_scales: [" +
                    std::string(200, 's') + "]}",
                "scales[0].name: 200 characters, over the limit of 128"},
        BadSpec{"too many seeds", "seeds", Seeds(65),
                "seeds: 65 seeds is over the limit of 64"},
        BadSpec{"empty seeds", "seeds", "[]", "seeds: empty list (line 9"},
        BadSpec{"empty fit targets", "fit", "{fit_scales: [A], targets: []}",
                "fit.targets: empty list"},
        BadSpec{"stop_when without a fit section", "adaptive",
                "{stop_when: {interval_below: 0.05}}\nfit: ",
                "adaptive.stop_when: needs a fit section"},
        BadSpec{"stop_when interval_below zero", "adaptive",
                "{stop_when: {interval_below: 0}}",
                "adaptive.stop_when.interval_below: must be > 0"},
        BadSpec{"stop_when without interval_below", "adaptive",
                "{stop_when: {}}",
                "adaptive.stop_when.interval_below: must be > 0"},
        BadSpec{"stop_when interval_below negative", "adaptive",
                "{stop_when: {interval_below: -0.1}}",
                "adaptive.stop_when.interval_below: must be > 0"},
        BadSpec{"stop_when interval_below infinite", "adaptive",
                "{stop_when: {interval_below: .inf}}",
                "adaptive.stop_when.interval_below: expected a finite "
                "number"},
        BadSpec{"unknown schedule_policy", "schedule_policy", "greedy",
                "schedule_policy: unknown policy 'greedy'; use default or "
                "adaptive"},
        BadSpec{
            "adaptive order without a fit section", "schedule_policy",
            "adaptive\nfit: ", "schedule_policy: adaptive needs a fit section"},
        BadSpec{"adaptive order target of an unknown scale", "schedule_policy",
                "adaptive\nadaptive: {target: {scales: [B, C]}}",
                "adaptive.target.scales[1]: unknown scale 'C' (scales: A, B)"},
        BadSpec{"adaptive order target scale twice", "schedule_policy",
                "adaptive\nadaptive: {target: {scales: [B, B]}}",
                "adaptive.target.scales[1]: duplicate scale"},
        BadSpec{"adaptive order without a target region", "schedule_policy",
                "adaptive\nfit: {fit_scales: [A, B]}",
                "adaptive.target.scales: missing"},
        BadSpec{"adaptive order target of no budget", "schedule_policy",
                "adaptive\nadaptive: {target: {largest_budgets: 0}}",
                "adaptive.target.largest_budgets: must be >= 1, got 0"},
        BadSpec{"target region without the adaptive order", "adaptive",
                "{target: {scales: [B]}}",
                "adaptive.target: only used by schedule_policy: adaptive"}),
    [](const testing::TestParamInfo<BadSpec>& param_info) {
      std::string name;
      for (const char* p = param_info.param.kind; *p != '\0'; ++p) {
        name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
      }
      return name;
    });

// D = ratio x N is checked before it is rounded into an int64.
TEST(SweepValidatorTest, TokensOfRatioTimesNBeyondTheLimitAreRefused) {
  const absl::Status status = Check(SpecText(
      "scales",
      "[{name: A, d_model: 65536, n_layers: 2, n_heads: 64, n_kv_heads: 16}]\n"
      "fit: {fit_scales: [A]}\n"
      "budgets: {tokens_per_param: [5, 1.0e+6]}\n"
      "architectures: [full]"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  EXPECT_EQ(message.rfind("budgets.tokens_per_param[1]: gives ", 0), 0u)
      << message;
  EXPECT_NE(message.find("tokens for full/A (N = "), std::string::npos)
      << message;
  EXPECT_NE(message.find("over the limit of 1000000000000000 tokens a run"),
            std::string::npos)
      << message;
}

// JSON, the form hlab prints (every unset list as []), reads back with its
// empty lists: only YAML refuses them.
TEST(SweepValidatorTest, EmptyListsAreAllowedInJson) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      ParseSweepSpec("{\"name\": \"j\", \"seeds\": [], \"resources\": []}");
  EXPECT_TRUE(spec.ok()) << spec.status();
}

}  // namespace
}  // namespace hlab::sweep
