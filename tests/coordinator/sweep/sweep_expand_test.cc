// Expansion of sweeps into runs and tasks: counts, run-id and spec-hash
// stability, the WSD trunk/decay plan and its compute saving, the LongPPL
// dependency, and the dry-run text.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_replace.h"
#include "coordinator/sweep/dry_run.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/run_config.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::sweep {
namespace {

const char kBase[] = R"(name: t
architectures: [full, swa-16]
scales:
  - {name: A, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2}
  - {name: B, d_model: 48, n_layers: 2, n_heads: 4, n_kv_heads: 2}
budgets: {tokens_per_param: [5, 10]}
seq_len: 64
batch_tokens: 256
schedule: {peak_lr: 1.0e-3, warmup_steps: 5}
)";

SweepPlan Plan(const std::string& text) {
  absl::StatusOr<hlab::v1::SweepSpec> spec = ParseSweepSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<SweepPlan> plan = PlanSweep(*spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : SweepPlan{};
}

std::map<std::string, int> CountKinds(const SweepPlan& plan) {
  std::map<std::string, int> kinds;
  for (const auto& t : plan.tasks) ++kinds[TaskKindName(t.kind())];
  return kinds;
}

std::set<std::string> RunIds(const SweepPlan& plan) {
  std::set<std::string> ids;
  for (const auto& r : plan.runs) ids.insert(r.run_id());
  return ids;
}

std::set<std::string> EvalTaskIds(const SweepPlan& plan) {
  std::set<std::string> ids;
  for (const auto& t : plan.tasks) {
    if (t.kind() == hlab::v1::TASK_KIND_EVAL) ids.insert(t.task_id());
  }
  return ids;
}

TEST(SweepExpandTest, OneRunPerArchitectureScaleBudgetSeed) {
  const SweepPlan plan = Plan(std::string(kBase) + "seeds: [0, 1, 2]\n");
  EXPECT_EQ(plan.runs.size(), 2u * 2u * 2u * 3u);
  EXPECT_EQ(RunIds(plan).size(), plan.runs.size());  // all distinct
  for (const auto& run : plan.runs) {
    EXPECT_EQ(run.tokens() % 256, 0) << "whole batches";
    EXPECT_EQ(run.steps() * 256, run.tokens());
    const double ratio = static_cast<double>(run.tokens()) /
                         static_cast<double>(run.non_embedding_params());
    // Rounded to the nearest batch: within half a batch of ratio * N.
    EXPECT_LE(std::fabs(ratio * run.non_embedding_params() -
                        run.tokens_per_param() * run.non_embedding_params()),
              128.0);
    EXPECT_EQ(run.run_id().size(), 16u);
  }
}

TEST(SweepExpandTest, SharedTrunksWithOneDecayPerBudget) {
  const SweepPlan plan = Plan(kBase);
  auto kinds = CountKinds(plan);
  EXPECT_EQ(kinds["trunk"], 4);  // (arch, scale, seed) groups
  EXPECT_EQ(kinds["decay"], 8);
  EXPECT_EQ(kinds["train"], 0);
  EXPECT_EQ(kinds["eval"], 8);  // validation loss is on by default
}

TEST(SweepExpandTest, NoSharingTrainsEachRunFromScratch) {
  const SweepPlan plan = Plan(std::string(kBase) + "share_trunk: false\n");
  auto kinds = CountKinds(plan);
  EXPECT_EQ(kinds["train"], 8);
  EXPECT_EQ(kinds["trunk"], 0);
  EXPECT_EQ(kinds["decay"], 0);
}

TEST(SweepExpandTest, BranchPointsAtNinetyPercentOfEachBudget) {
  const SweepPlan plan = Plan(kBase);
  std::map<std::string, const hlab::v1::Run*> runs;
  for (const auto& r : plan.runs) runs[r.run_id()] = &r;
  std::map<std::string, const hlab::v1::Task*> tasks;
  for (const auto& t : plan.tasks) tasks[t.task_id()] = &t;
  int checked = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
    int64_t last_branch = 0;
    for (const auto& bp : t.branch_points()) {
      const hlab::v1::Run& run = *runs.at(bp.run_id());
      const int64_t expected =
          run.steps() - std::llround(0.1 * static_cast<double>(run.steps()));
      EXPECT_EQ(bp.step(), expected);
      EXPECT_NEAR(static_cast<double>(bp.tokens()), 0.9 * run.tokens(), 256.0);
      last_branch = std::max(last_branch, bp.step());
      ++checked;
    }
    EXPECT_EQ(t.end_step(), last_branch) << "trunk ends at the last branch";
  }
  EXPECT_EQ(checked, 8);
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_DECAY) continue;
    ASSERT_EQ(t.depends_on_size(), 1);
    const hlab::v1::Task& trunk = *tasks.at(t.depends_on(0));
    EXPECT_EQ(trunk.kind(), hlab::v1::TASK_KIND_TRUNK);
    const hlab::v1::Run& run = *runs.at(t.run_ids(0));
    EXPECT_EQ(t.end_step(), run.steps());
    bool found = false;
    for (const auto& bp : trunk.branch_points()) {
      if (bp.run_id() == run.run_id()) {
        EXPECT_EQ(t.start_step(), bp.step());
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }
}

// schedule_policy: adaptive plans each trunk as a chain of segments between
// its branch points: the same runs, decays and EVAL tasks, the same FLOPs;
// segment k trains [b_(k-1), b_k) for the runs branching at or after b_k,
// after segment k-1, and a decay waits for every segment up to its branch
// point. The default order's plan is one trunk per group.
TEST(SweepExpandTest, AdaptiveTrunksAreChainsOfSegments) {
  const std::string spec =
      std::string(kBase) + "fit: {fit_scales: [A], verify_scales: [B]}\n";
  const std::string three = absl::StrReplaceAll(
      spec, {{"tokens_per_param: [5, 10]", "tokens_per_param: [5, 10, 20]"}});
  const SweepPlan whole = Plan(three);
  const SweepPlan plan = Plan(three + "schedule_policy: adaptive\n");
  ASSERT_EQ(plan.runs.size(), 12u);
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    EXPECT_EQ(plan.runs[i].SerializeAsString(),
              whole.runs[i].SerializeAsString());
  }
  EXPECT_EQ(EvalTaskIds(plan), EvalTaskIds(whole));
  EXPECT_EQ(plan.flops_shared, whole.flops_shared);
  EXPECT_EQ(CountKinds(whole)["trunk"], 4);
  EXPECT_EQ(CountKinds(plan)["trunk"], 12);  // 3 segments per group
  EXPECT_EQ(CountKinds(plan)["decay"], 12);
  std::map<std::string, const hlab::v1::Task*> tasks;
  for (const auto& t : plan.tasks) tasks[t.task_id()] = &t;
  std::map<std::string, int64_t> branch;  // run -> its decay start
  double trunk_flops = 0, whole_trunk_flops = 0;
  for (const auto& t : whole.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
    whole_trunk_flops += t.flops();
    for (const auto& bp : t.branch_points()) branch[bp.run_id()] = bp.step();
  }
  int firsts = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
    trunk_flops += t.flops();
    // Its runs: those branching at or after its end, one at its end.
    int at_end = 0;
    for (const auto& bp : t.branch_points()) {
      EXPECT_EQ(bp.step(), branch.at(bp.run_id()));
      EXPECT_GE(bp.step(), t.end_step());
      at_end += bp.step() == t.end_step();
    }
    EXPECT_EQ(at_end, 1) << t.task_id();
    EXPECT_EQ(t.run_ids_size(), t.branch_points_size());
    if (t.start_step() == 0) {
      ++firsts;
      EXPECT_EQ(t.depends_on_size(), 0);
      EXPECT_EQ(t.branch_points_size(), 3);
      continue;
    }
    // After the segment that ends where it starts.
    ASSERT_EQ(t.depends_on_size(), 1);
    const hlab::v1::Task& before = *tasks.at(t.depends_on(0));
    EXPECT_EQ(before.kind(), hlab::v1::TASK_KIND_TRUNK);
    EXPECT_EQ(before.end_step(), t.start_step());
    EXPECT_EQ(before.run_ids_size(), t.run_ids_size() + 1);
  }
  EXPECT_EQ(firsts, 4);
  EXPECT_DOUBLE_EQ(trunk_flops, whole_trunk_flops);
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_DECAY) continue;
    const int64_t start = branch.at(t.run_ids(0));
    EXPECT_EQ(t.start_step(), start);
    // Every segment up to its branch point, in chain order, none past it.
    int64_t covered = 0;
    for (const auto& dep : t.depends_on()) {
      const hlab::v1::Task& segment = *tasks.at(dep);
      EXPECT_EQ(segment.kind(), hlab::v1::TASK_KIND_TRUNK);
      EXPECT_EQ(segment.start_step(), covered) << dep;
      covered = segment.end_step();
    }
    EXPECT_EQ(covered, start);
  }
}

TEST(SweepExpandTest, TrunkTrainsWithTheLargestBudgetsSchedule) {
  // Before its decay start the largest run's LR is warmup + constant, which
  // is what every budget's stable phase is; a smaller run's config would
  // start decaying inside the trunk.
  const SweepPlan plan = Plan(kBase);
  std::map<std::string, int64_t> steps;
  for (const auto& r : plan.runs) steps[r.run_id()] = r.steps();
  int trunks = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
    int64_t largest = 0;
    for (const auto& id : t.run_ids()) largest = std::max(largest, steps[id]);
    const std::string needle = "\"steps\":" + std::to_string(largest) + ",";
    EXPECT_NE(t.draft_json().find(needle), std::string::npos) << t.draft_json();
    ++trunks;
  }
  EXPECT_EQ(trunks, 4);
}

// The Q-gradient hook goes into every training task's draft, outside the
// run config: the same runs, ids and configs as without it.
TEST(SweepExpandTest, TheQGradHookChangesNoRunAndReachesEveryTrainingTask) {
  const SweepPlan plain = Plan(kBase);
  const SweepPlan hooked =
      Plan(std::string(kBase) + "\nanalysis: {q_grad_every_steps: 5}\n");
  ASSERT_EQ(plain.runs.size(), hooked.runs.size());
  for (size_t i = 0; i < plain.runs.size(); ++i) {
    EXPECT_EQ(plain.runs[i].run_id(), hooked.runs[i].run_id());
    EXPECT_EQ(plain.runs[i].config_json(), hooked.runs[i].config_json());
  }
  int training = 0;
  for (const auto& t : hooked.tasks) {
    const bool trains = t.kind() != hlab::v1::TASK_KIND_EVAL;
    const bool has =
        t.draft_json().find("\"analysis\":{\"q_grad_every_steps\":5}") !=
        std::string::npos;
    EXPECT_EQ(has, trains) << t.draft_json();
    training += trains ? 1 : 0;
  }
  EXPECT_GT(training, 0);
  for (const auto& t : plain.tasks) {
    EXPECT_EQ(t.draft_json().find("\"q_grad_every_steps\":5"),
              std::string::npos)
        << t.draft_json();
  }
}

TEST(SweepExpandTest, FlopSavingMatchesHandComputation) {
  // One model, budgets of 10 and 20 steps of 256 tokens. Decay 10%:
  // branch points at steps 9 and 18. Shared: trunk 18 steps + decays 1 + 2
  // = 21 steps; unshared: 10 + 20 = 30 steps. Saving: 9 steps of 256 tokens.
  const SweepPlan plan = Plan(R"(name: hand
architectures: [full]
scales: [{name: A, d_model: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2}]
budgets: {tokens: [2560, 5120]}
seq_len: 64
batch_tokens: 256
schedule: {peak_lr: 1.0e-3, warmup_steps: 2}
)");
  ASSERT_EQ(plan.runs.size(), 2u);
  const double per_token =
      plan.runs[0].flops() / static_cast<double>(plan.runs[0].tokens());
  EXPECT_GT(per_token, 0);
  EXPECT_DOUBLE_EQ(plan.flops_unshared, per_token * 30 * 256);
  EXPECT_DOUBLE_EQ(plan.flops_shared, per_token * 21 * 256);
  EXPECT_DOUBLE_EQ(plan.flops_unshared - plan.flops_shared,
                   per_token * 9 * 256);
  EXPECT_EQ(plan.tokens_shared, 21 * 256);
  EXPECT_EQ(plan.tokens_unshared, 30 * 256);
}

TEST(SweepExpandTest, RunIdIgnoresSweepNameAndIsSharedAcrossSweeps) {
  const SweepPlan a = Plan(kBase);
  std::string renamed = kBase;
  renamed.replace(renamed.find("name: t"), 7, "name: other-sweep");
  const SweepPlan b = Plan(renamed);
  EXPECT_EQ(RunIds(a), RunIds(b));
  EXPECT_NE(a.spec_hash, b.spec_hash);
  // A sweep with one more architecture contains every run of the first.
  std::string wider = kBase;
  wider.replace(wider.find("[full, swa-16]"), 14, "[full, swa-16, gdn]");
  const std::set<std::string> wider_ids = RunIds(Plan(wider));
  for (const auto& id : RunIds(a)) EXPECT_EQ(wider_ids.count(id), 1u) << id;
  EXPECT_EQ(wider_ids.size(), 12u);
}

TEST(SweepExpandTest, AnyConfigChangeChangesTheRunId) {
  const std::set<std::string> base = RunIds(Plan(kBase));
  // Every run (of `scale`, if given) gets a new id.
  auto changed = [&](const std::string& from, const std::string& to,
                     const std::string& scale = "") {
    std::string text = kBase;
    text.replace(text.find(from), from.size(), to);
    for (const auto& run : Plan(text).runs) {
      if (!scale.empty() && run.scale() != scale) {
        EXPECT_EQ(base.count(run.run_id()), 1u) << "unchanged run";
        continue;
      }
      EXPECT_EQ(base.count(run.run_id()), 0u) << from << " -> " << to;
    }
  };
  changed("peak_lr: 1.0e-3", "peak_lr: 2.0e-3");
  changed("warmup_steps: 5", "warmup_steps: 6");
  changed("seq_len: 64\nbatch_tokens: 256", "seq_len: 32\nbatch_tokens: 256");
  changed("batch_tokens: 256", "batch_tokens: 512");
  changed("n_kv_heads: 2}\n  - {name: B", "n_kv_heads: 1}\n  - {name: B", "A");
  std::string seeded = std::string(kBase) + "seeds: [1]\n";
  for (const auto& id : RunIds(Plan(seeded))) EXPECT_EQ(base.count(id), 0u);
  std::string data = std::string(kBase) + "data: {long_fraction: 0.25}\n";
  for (const auto& id : RunIds(Plan(data))) EXPECT_EQ(base.count(id), 0u);
  std::string rope = std::string(kBase) + "rope_theta: 500000\n";
  for (const auto& id : RunIds(Plan(rope))) EXPECT_EQ(base.count(id), 0u);
  changed("n_kv_heads: 2}\n  - {name: B",
          "n_kv_heads: 2, rope_theta: 5.0e5}\n  - {name: B", "A");
}

TEST(SweepExpandTest, RopeThetaTravelsFromTheSpecToEachRunsModel) {
  // The sweep's value, a scale's own, and the default for specs without.
  const SweepPlan plan = Plan(std::string(kBase) + "rope_theta: 500000\n");
  std::string scaled_text = kBase;
  const std::string a_end = "n_kv_heads: 2}\n";
  scaled_text.replace(scaled_text.find(a_end), a_end.size(),
                      "n_kv_heads: 2, rope_theta: 1.0e6}\n");
  const SweepPlan scaled = Plan(scaled_text);
  const SweepPlan plain = Plan(kBase);
  auto thetas = [](const SweepPlan& p) {
    std::map<std::string, double> by_scale;
    for (const auto& run : p.runs) {
      const auto config = nlohmann::json::parse(run.config_json());
      by_scale[run.scale()] = config["model"]["rope_theta"].get<double>();
    }
    return by_scale;
  };
  EXPECT_EQ(thetas(plan),
            (std::map<std::string, double>{{"A", 5e5}, {"B", 5e5}}));
  EXPECT_EQ(thetas(scaled),
            (std::map<std::string, double>{{"A", 1e6}, {"B", 1e4}}));
  EXPECT_EQ(thetas(plain),
            (std::map<std::string, double>{{"A", 1e4}, {"B", 1e4}}));
}

TEST(SweepExpandTest, SpecHashIgnoresKeyOrderAndSpelledOutDefaults) {
  const char reordered[] = R"(schedule: {warmup_steps: 5, peak_lr: 0.001}
batch_tokens: 256
seq_len: 64
budgets: {tokens_per_param: [5, 10]}
scales:
  - {n_kv_heads: 2, n_heads: 4, n_layers: 2, d_model: 32, name: A}
  - {name: B, n_layers: 2, d_model: 48, n_heads: 4, n_kv_heads: 2}
architectures: [full, swa-16]
name: t
share_trunk: true
seeds: [0]
rope_theta: 10000
)";
  const SweepPlan a = Plan(kBase);
  const SweepPlan b = Plan(reordered);
  EXPECT_EQ(a.spec_hash, b.spec_hash);
  EXPECT_EQ(a.spec_hash.size(), 16u);
  const SweepPlan c = Plan(std::string(kBase) + "seeds: [1]\n");
  EXPECT_NE(a.spec_hash, c.spec_hash);
  // The JSON form of the same spec hashes the same too.
  const SweepPlan d = Plan(R"({"name": "t", "architectures": ["full", "swa-16"],
    "scales": [{"name": "A", "d_model": 32, "n_layers": 2, "n_heads": 4,
                "n_kv_heads": 2},
               {"name": "B", "d_model": 48, "n_layers": 2, "n_heads": 4,
                "n_kv_heads": 2}],
    "budgets": {"tokens_per_param": [5, 10]}, "seq_len": 64,
    "batch_tokens": 256, "schedule": {"peak_lr": 0.001, "warmup_steps": 5}})");
  EXPECT_EQ(a.spec_hash, d.spec_hash);
}

TEST(SweepExpandTest, LongPplEvalWaitsOnTheReferenceRun) {
  const SweepPlan plan =
      Plan(std::string(kBase) + "evaluation: {longppl: {enabled: true}}\n");
  // Reference: full at the largest scale (B), largest budget, seed 0.
  const hlab::v1::Run* reference = nullptr;
  for (const auto& r : plan.runs) {
    if (r.architecture() == "full" && r.scale() == "B" &&
        r.tokens_per_param() == 10) {
      reference = &r;
    }
  }
  ASSERT_NE(reference, nullptr);
  std::string reference_decay;
  for (const auto& t : plan.tasks) {
    if (t.kind() == hlab::v1::TASK_KIND_DECAY &&
        t.run_ids(0) == reference->run_id()) {
      reference_decay = t.task_id();
    }
  }
  ASSERT_FALSE(reference_decay.empty());
  int evals = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    ++evals;
    EXPECT_NE(std::find(t.depends_on().begin(), t.depends_on().end(),
                        reference_decay),
              t.depends_on().end())
        << t.task_id();
    EXPECT_NE(t.draft_json().find(reference->run_id()), std::string::npos);
    EXPECT_NE(t.draft_json().find("\"min_key_tokens\":10"), std::string::npos);
  }
  EXPECT_EQ(evals, 8);
  // The reference's trunk and decay are leased first; nothing else is.
  int raised = 0;
  for (const auto& t : plan.tasks) {
    const bool of_reference =
        t.kind() != hlab::v1::TASK_KIND_EVAL &&
        std::find(t.run_ids().begin(), t.run_ids().end(),
                  reference->run_id()) != t.run_ids().end();
    EXPECT_EQ(t.priority(), of_reference ? 1 : 0) << t.task_id();
    raised += of_reference;
  }
  EXPECT_EQ(raised, 2);  // its trunk and its decay
  // Without LongPPL there is no reference to wait for.
  for (const auto& t : Plan(kBase).tasks) EXPECT_EQ(t.priority(), 0);
}

// Two references without a run of the sweep: a Hugging Face Llama
// (hf_dir) and key tokens from a file. Neither waits on a run, and each
// draft carries what hlab-eval needs.
TEST(SweepExpandTest, LlamaReferencesAndKeyTokenFilesWaitOnNoRun) {
  const SweepPlan llama =
      Plan(std::string(kBase) +
           "evaluation: {longppl: {enabled: true, reference: {hf_dir: "
           "/models/llama, dtype: bf16}}}\n");
  const SweepPlan keys =
      Plan(std::string(kBase) +
           "evaluation: {longppl: {enabled: true, aggregation: per_document, "
           "key_tokens: {slices: /k/slices, texts: /k/texts.jsonl}}}\n");
  for (const SweepPlan* plan : {&llama, &keys}) {
    int evals = 0;
    for (const auto& t : plan->tasks) {
      EXPECT_EQ(t.priority(), 0) << t.task_id();  // no reference run first
      if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
      ++evals;
      EXPECT_EQ(t.depends_on_size(), 1) << t.task_id();  // its own run only
      const nlohmann::json draft = nlohmann::json::parse(t.draft_json());
      const nlohmann::json& l = draft["evals"]["longppl"];
      if (plan == &llama) {
        EXPECT_EQ(l["reference"]["hf_dir"], "/models/llama") << l.dump();
        EXPECT_EQ(l["reference"]["dtype"], "bf16") << l.dump();
      } else {
        EXPECT_EQ(l["key_tokens"]["slices"], "/k/slices") << l.dump();
        EXPECT_EQ(l["key_tokens"]["texts"], "/k/texts.jsonl") << l.dump();
        EXPECT_EQ(l["aggregation"], "per_document") << l.dump();
        EXPECT_EQ(l["reference"]["run_id"], "") << l.dump();
        EXPECT_EQ(l["reference"]["checkpoint_path"], "") << l.dump();
      }
    }
    EXPECT_EQ(evals, 8);
  }
  // Evaluation settings that are not given keep older sweeps' task ids.
  const SweepPlan plain =
      Plan(std::string(kBase) + "evaluation: {longppl: {enabled: true}}\n");
  const SweepPlan pooled =
      Plan(std::string(kBase) +
           "evaluation: {longppl: {enabled: true, aggregation: pooled}}\n");
  EXPECT_EQ(EvalTaskIds(plain), EvalTaskIds(pooled));
}

TEST(SweepExpandTest, EvalTasksCarryTheirSettings) {
  const SweepPlan a = Plan(std::string(kBase) +
                           "evaluation: {niah: {enabled: true, samples: 7}}\n");
  const SweepPlan b = Plan(std::string(kBase) +
                           "evaluation: {niah: {enabled: true, samples: 8}}\n");
  EXPECT_EQ(RunIds(a), RunIds(b)) << "evaluation is not part of a run";
  const std::set<std::string> ids_a = EvalTaskIds(a);
  for (const auto& id : EvalTaskIds(b)) EXPECT_EQ(ids_a.count(id), 0u) << id;
  for (const auto& t : a.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    EXPECT_NE(t.draft_json().find("\"samples\":7"), std::string::npos);
    // The synthetic corpus's own needles by default.
    EXPECT_NE(t.draft_json().find("\"haystack\":\"synthetic\""),
              std::string::npos);
    EXPECT_NE(t.draft_json().find("\"config\":"), std::string::npos);
  }
}

TEST(SweepExpandTest, ValidationLossDocumentsReachTheTaskAndItsId) {
  const SweepPlan plain = Plan(kBase);
  // Spelling out the default leaves every EVAL id as it was.
  const SweepPlan mixture =
      Plan(std::string(kBase) +
           "evaluation: {validation_loss: {documents: mixture}}\n");
  const SweepPlan shorts =
      Plan(std::string(kBase) +
           "evaluation: {validation_loss: {documents: short}}\n");
  EXPECT_EQ(EvalTaskIds(plain), EvalTaskIds(mixture));
  EXPECT_EQ(RunIds(plain), RunIds(shorts));
  const std::set<std::string> ids = EvalTaskIds(plain);
  ASSERT_FALSE(ids.empty());
  for (const auto& id : EvalTaskIds(shorts)) EXPECT_EQ(ids.count(id), 0u) << id;
  for (const auto& t : shorts.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    EXPECT_NE(t.draft_json().find("\"documents\":\"short\""), std::string::npos)
        << t.draft_json();
  }
}

TEST(SweepExpandTest, ReceptiveFieldEvaluationsCarryTheirLimit) {
  // Default H = seq_len / 8 = 8; EVAL tasks of sweeps without it keep
  // their ids (their settings do not name it).
  const SweepPlan plain = Plan(kBase);
  const SweepPlan plan = Plan(std::string(kBase) +
                              "evaluation: {receptive_field: {enabled: "
                              "true}}\n");
  int evals = 0;
  for (const auto& task : plan.tasks) {
    if (task.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    ++evals;
    const auto draft = nlohmann::json::parse(task.draft_json());
    EXPECT_EQ(draft["evals"]["receptive_field"]["limit"], 8) << draft.dump();
    EXPECT_TRUE(draft["evals"].contains("val_loss"));
    for (const auto& other : plain.tasks) {
      EXPECT_NE(other.task_id(), task.task_id());
    }
  }
  EXPECT_EQ(evals, 8);
}

TEST(SweepExpandTest, MultipleChoiceTasksReachEachEvalTask) {
  // Absent delimiters and seed are lm-eval's; given ones travel as given.
  const SweepPlan plan = Plan(
      std::string(kBase) +
      "evaluation: {multiple_choice: {enabled: true, tasks: [{file: "
      "/data/arc_easy.test.jsonl, fewshot_file: /data/arc_easy.train.jsonl, "
      "num_fewshot: 5}, {name: piqa, file: /data/piqa.jsonl, "
      "target_delimiter: ': ', limit: 100}]}}\n");
  int evals = 0;
  for (const auto& task : plan.tasks) {
    if (task.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    ++evals;
    const auto mc =
        nlohmann::json::parse(task.draft_json())["evals"]["multiple_choice"];
    EXPECT_EQ(mc["seed"], 1234);
    ASSERT_EQ(mc["tasks"].size(), 2u) << mc.dump();
    EXPECT_EQ(mc["tasks"][0]["file"], "/data/arc_easy.test.jsonl");
    EXPECT_EQ(mc["tasks"][0]["num_fewshot"], 5);
    EXPECT_EQ(mc["tasks"][0]["target_delimiter"], " ");
    EXPECT_EQ(mc["tasks"][0]["fewshot_delimiter"], "\n\n");
    EXPECT_EQ(mc["tasks"][1]["name"], "piqa");
    EXPECT_EQ(mc["tasks"][1]["target_delimiter"], ": ");
    EXPECT_EQ(mc["tasks"][1]["limit"], 100);
  }
  EXPECT_EQ(evals, 8);
  // Another seed is another evaluation.
  const SweepPlan seeded = Plan(
      std::string(kBase) +
      "evaluation: {multiple_choice: {enabled: true, seed: 7, tasks: [{file: "
      "/data/arc_easy.test.jsonl, fewshot_file: /data/arc_easy.train.jsonl, "
      "num_fewshot: 5}, {name: piqa, file: /data/piqa.jsonl, "
      "target_delimiter: ': ', limit: 100}]}}\n");
  const std::set<std::string> ids = EvalTaskIds(plan);
  for (const auto& id : EvalTaskIds(seeded)) EXPECT_EQ(ids.count(id), 0u);
}

TEST(SweepExpandTest, BranchPointEvaluationsDependOnTheTrunk) {
  const SweepPlan plan =
      Plan(std::string(kBase) + "evaluation: {at_branch_points: true}\n");
  EXPECT_EQ(CountKinds(plan)["eval"], 16);
}

// evaluation.trajectory: every K steps of each training task an EVAL task
// of the run whose trajectory it trains (a trunk's longest run), after
// that task, measuring only the named evaluations; no run, and no other
// EVAL task, changes; the training tasks keep a checkpoint per K steps.
TEST(SweepExpandTest, TrajectoryEvaluationsFollowEachTrainingTask) {
  constexpr int64_t kEvery = 40;
  const std::string evaluation =
      "evaluation: {retrieval_heads: {enabled: true}, ";
  const SweepPlan plain = Plan(std::string(kBase) + evaluation + "}\n");
  const SweepPlan plan =
      Plan(std::string(kBase) + evaluation +
           "trajectory: {every_steps: 40, evals: [retrieval_heads]}}\n");
  EXPECT_EQ(RunIds(plain), RunIds(plan));
  const std::set<std::string> trajectory_ids = EvalTaskIds(plan);
  for (const auto& id : EvalTaskIds(plain)) {
    EXPECT_EQ(trajectory_ids.count(id), 1u) << "lost " << id;
  }
  std::map<std::string, int64_t> run_steps;
  for (const auto& r : plan.runs) run_steps[r.run_id()] = r.steps();
  // Every (run, step) the training tasks cover at a multiple of K, with
  // the task that trains it: a brute-force walk over each task's steps.
  std::map<std::pair<std::string, int64_t>, std::string> expected;
  for (const auto& t : plan.tasks) {
    if (t.kind() == hlab::v1::TASK_KIND_EVAL) continue;
    const auto draft = nlohmann::json::parse(t.draft_json());
    EXPECT_EQ(draft.value("keep_checkpoint_every_steps", 0), kEvery)
        << t.task_id();
    std::string owner = t.run_ids(0);
    for (const auto& id : t.run_ids()) {
      if (run_steps[id] > run_steps[owner]) owner = id;
    }
    for (int64_t step = t.start_step() + 1; step <= t.end_step(); ++step) {
      if (step % kEvery == 0 && step != run_steps[owner]) {
        expected[{owner, step}] = t.task_id();
      }
    }
  }
  ASSERT_GT(expected.size(), 8u);
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    const std::pair<std::string, int64_t> key{t.run_ids(0), t.eval_step()};
    EXPECT_TRUE(seen.insert(key).second) << "two EVAL tasks at " << key.second;
    if (t.eval_step() == run_steps[t.run_ids(0)]) {
      EXPECT_EQ(t.evals_size(), 2) << "the final EVAL measures everything";
      continue;
    }
    ASSERT_EQ(expected.count(key), 1u)
        << "unexpected EVAL of " << key.first << " at " << key.second;
    EXPECT_EQ(t.depends_on_size(), 1);
    EXPECT_EQ(t.depends_on(0), expected.at(key));
    ASSERT_EQ(t.evals_size(), 1);
    EXPECT_EQ(t.evals(0), "retrieval_heads");
    const auto draft = nlohmann::json::parse(t.draft_json());
    EXPECT_TRUE(draft["evals"].contains("retrieval_heads"));
    EXPECT_FALSE(draft["evals"].contains("val_loss")) << draft.dump();
    EXPECT_FALSE(draft.contains("keep_checkpoint_every_steps"));
  }
  EXPECT_EQ(seen.size(), expected.size() + plan.runs.size());
  for (const auto& t : plain.tasks) {
    EXPECT_EQ(t.draft_json().find("keep_checkpoint_every_steps"),
              std::string::npos);
  }
}

// With trunk segments, a trajectory point inside a segment is its longest
// run's (the kept checkpoint's), and the one at its end the run whose branch
// checkpoint the segment writes there (it keeps no other at its end).
TEST(SweepExpandTest, SegmentTrajectoryPointsHaveACheckpointOfTheirRun) {
  const SweepPlan plan = Plan(std::string(kBase) +
                              "fit: {fit_scales: [A], verify_scales: [B]}\n"
                              "schedule_policy: adaptive\n"
                              "evaluation: {trajectory: {every_steps: 5}}\n");
  std::map<std::string, const hlab::v1::Task*> tasks;
  for (const auto& t : plan.tasks) tasks[t.task_id()] = &t;
  std::map<std::string, int64_t> run_steps;
  for (const auto& r : plan.runs) run_steps[r.run_id()] = r.steps();
  int inside = 0, at_end = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    const hlab::v1::Task& from = *tasks.at(t.depends_on(0));
    if (from.kind() != hlab::v1::TASK_KIND_TRUNK) continue;
    const std::string& run = t.run_ids(0);
    ASSERT_GT(t.eval_step(), from.start_step());
    ASSERT_LE(t.eval_step(), from.end_step());
    if (t.eval_step() < from.end_step()) {
      ++inside;
      std::string longest = from.run_ids(0);
      for (const auto& id : from.run_ids()) {
        if (run_steps[id] > run_steps[longest]) longest = id;
      }
      EXPECT_EQ(run, longest) << t.task_id();
      continue;
    }
    ++at_end;
    bool branches_there = false;
    for (const auto& bp : from.branch_points()) {
      branches_there |= bp.run_id() == run && bp.step() == from.end_step();
    }
    EXPECT_TRUE(branches_there) << t.task_id();
  }
  EXPECT_GT(inside, 0);
  EXPECT_GT(at_end, 0);
}

// evaluation.ruler reaches each EVAL task's draft with its defaults: every
// field hlab-eval's evals.ruler reads.
TEST(SweepExpandTest, RulerReachesTheEvalDraftsWithItsDefaults) {
  const SweepPlan plan =
      Plan(std::string(kBase) +
           "evaluation: {ruler: {enabled: true, tasks: [vt, niah_single_2], "
           "tokens_to_generate: 16, essay_file: /data/essay.txt}}\n");
  int evals = 0;
  for (const auto& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    ++evals;
    const auto draft = nlohmann::json::parse(t.draft_json());
    ASSERT_TRUE(draft["evals"].contains("ruler")) << draft.dump();
    const auto& r = draft["evals"]["ruler"];
    EXPECT_EQ(r["tasks"], nlohmann::json({"vt", "niah_single_2"}));
    EXPECT_EQ(r["lengths"], nlohmann::json({plan.spec.seq_len()}));
    EXPECT_EQ(r["samples"], 20);
    EXPECT_EQ(r["tokens_to_generate"], 16);
    EXPECT_EQ(r["essay_file"], "/data/essay.txt");
    EXPECT_EQ(r["squad_file"], "");
  }
  EXPECT_GT(evals, 0);
}

TEST(SweepExpandTest, DryRunPrintsGridAndTotals) {
  const SweepPlan plan = Plan(kBase);
  const std::string text = RenderDryRun(plan);
  for (const auto& run : plan.runs) {
    EXPECT_NE(text.find(run.run_id()), std::string::npos);
  }
  EXPECT_NE(text.find("8 runs"), std::string::npos);
  EXPECT_NE(text.find("with WSD trunk sharing:"), std::string::npos);
  EXPECT_NE(text.find("without WSD trunk sharing:"), std::string::npos);
  EXPECT_NE(text.find(FormatScientific(plan.flops_shared)), std::string::npos);
  EXPECT_NE(text.find(FormatScientific(plan.flops_unshared)),
            std::string::npos);
  EXPECT_NE(text.find("saving from trunk sharing"), std::string::npos);
}

TEST(SweepExpandTest, DryRunShowsEachModelsMatchedDimensions) {
  // d 128, 4 heads of 32, 2 kv heads, FFN 384.
  const std::string out = RenderDryRun(Plan(R"(name: t
architectures: [full, gdn, gdn-mha, mamba2, lightning]
scales:
  - {name: A, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2}
budgets: {tokens_per_param: [5]}
seq_len: 64
batch_tokens: 256
schedule: {peak_lr: 1.0e-3, warmup_steps: 5}
)"));
  EXPECT_NE(out.find("models (appendix B matching):"), std::string::npos)
      << out;
  // Attention's mixer has 49156 parameters. Grouped GDN: 128 dk (2 x 2 +
  // 3 x 4) + dk + 1032 (a, b, A_log, dt_bias) is nearest at dk = 23; with a
  // q, k head per value head, 128 dk 5 x 4 + dk + 1032 at dk = 19.
  EXPECT_NE(out.find("gdn dk = dv 23, q/k heads 2 of 4 value heads, FFN 384 "
                     "(B.3)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("gdn dk = dv 19, q/k heads 4 of 4 value heads"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("mamba2 state 16, head dim 64"), std::string::npos) << out;
  EXPECT_NE(out.find("lightning FFN"), std::string::npos) << out;
}

TEST(SweepExpandTest, Sha256MatchesKnownAnswer) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace hlab::sweep
