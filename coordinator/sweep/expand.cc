#include "coordinator/sweep/expand.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/sweep/internal/grid_checks.h"
#include "coordinator/sweep/limits.h"
#include "coordinator/sweep/run_config.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_validator.h"
#include "model/config/architectures.h"
#include "model/config/param_count.h"
#include "task/eval_task.h"
#include "task/run_config.h"

namespace hlab::sweep {
namespace {

using hlab::v1::Run;
using hlab::v1::SweepSpec;
using hlab::v1::Task;
using hlab::v1::TaskKind;

// What expansion knows about a run beyond its proto.
struct RunInfo {
  int arch = 0;
  int scale = 0;
  int budget = 0;
  int64_t seed = 0;
  int64_t steps = 0;
  int64_t branch_step = 0;  // decay start
  int64_t batch_tokens = 0;
  double flops_per_token = 0;
  std::string final_task;  // the task that finishes its training
};

hlab::v1::ResourceRequest ResourcesFor(const SweepSpec& spec,
                                       const std::string& scale) {
  hlab::v1::ResourceRequest out;
  for (const auto& r : spec.resources()) {
    if (r.scale() != scale) continue;
    out.set_gpus(r.gpus());
    out.set_gpu_memory_bytes(r.gpu_memory_bytes());
    out.set_cpu_threads(r.cpu_threads());
    out.set_cpu_ranks(r.cpu_ranks());
  }
  return out;
}

Task NewTask(const SweepSpec& spec, TaskKind kind, const std::string& key,
             const std::string& scale) {
  Task t;
  t.set_kind(kind);
  t.set_task_id(absl::StrCat(TaskKindName(kind), "-", ShortHash(key)));
  *t.mutable_resources() = ResourcesFor(spec, scale);
  // Evaluation runs in one process; only training is data parallel on CPU.
  if (kind == hlab::v1::TASK_KIND_EVAL)
    t.mutable_resources()->clear_cpu_ranks();
  t.set_priority(spec.priority());
  t.set_state(hlab::v1::TASK_STATE_PENDING);
  return t;
}

void AddDependency(Task* task, const std::string& id) {
  for (const auto& d : task->depends_on()) {
    if (d == id) return;
  }
  task->add_depends_on(id);
  task->set_state(hlab::v1::TASK_STATE_BLOCKED);
}

// The run LongPPL is measured against when it is a run of this sweep:
// the reference architecture at the reference scale (default: the one with
// the largest N), its largest budget, the first seed. -1 when outside.
int ReferenceRun(const SweepSpec& spec, const std::vector<Run>& runs,
                 const std::vector<RunInfo>& info) {
  const auto& ref = spec.evaluation().longppl().reference();
  if (!spec.evaluation().longppl().enabled() || ref.architecture().empty()) {
    return -1;
  }
  int best = -1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    if (r.architecture() != ref.architecture()) continue;
    if (!ref.scale().empty() && r.scale() != ref.scale()) continue;
    if (info[i].seed != spec.seeds(0)) continue;
    if (best < 0 || std::make_tuple(r.non_embedding_params(), r.tokens()) >
                        std::make_tuple(runs[best].non_embedding_params(),
                                        runs[best].tokens())) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

nlohmann::json TrainingTaskJson(const SweepSpec& spec, const Task& t,
                                const std::string& config) {
  nlohmann::json j;
  j["kind"] = TaskKindName(t.kind());
  j["task_id"] = t.task_id();
  j["run_ids"] =
      std::vector<std::string>(t.run_ids().begin(), t.run_ids().end());
  j["start_step"] = t.start_step();
  j["end_step"] = t.end_step();
  nlohmann::json branches = nlohmann::json::array();
  for (const auto& b : t.branch_points()) {
    branches.push_back({{"run_id", b.run_id()}, {"step", b.step()}});
  }
  if (!branches.empty()) j["branch_points"] = branches;
  j["config"] = nlohmann::json::parse(config);
  // Outside the run config: a hook changes no loss, so no run id.
  if (spec.analysis().q_grad_every_steps() > 0) {
    j["analysis"] = {
        {"q_grad_every_steps", spec.analysis().q_grad_every_steps()}};
  }
  // Neither do the checkpoints kept for evaluation.trajectory.
  if (spec.evaluation().trajectory().every_steps() > 0) {
    j["keep_checkpoint_every_steps"] =
        spec.evaluation().trajectory().every_steps();
  }
  return j;
}

}  // namespace

// What an EVAL task measures and with which settings (defaults applied).
std::string EvaluationSettings(const SweepSpec& spec) {
  const auto& e = spec.evaluation();
  nlohmann::json j = nlohmann::json::object();
  if (e.validation_loss().enabled()) {
    j["val_loss"] = {{"tokens", e.validation_loss().tokens()}};
    // Named only when not the default, so older sweeps keep their ids.
    const std::string& documents = e.validation_loss().documents();
    if (!documents.empty() && documents != task::kValLossMixture) {
      j["val_loss"]["documents"] = documents;
    }
  }
  if (e.longppl().enabled()) {
    const auto& l = e.longppl();
    j["longppl"] = {{"trunc_len", l.trunc_len()},
                    {"sliding_window", l.sliding_window()},
                    {"context_len", l.context_len()},
                    {"min_key_tokens", l.min_key_tokens()}};
    // Named only when given, so older sweeps keep their ids.
    if (!l.aggregation().empty() && l.aggregation() != task::kLongPplPooled) {
      j["longppl"]["aggregation"] = l.aggregation();
    }
    const auto& k = l.key_tokens();
    nlohmann::json keys = nlohmann::json::object();
    for (const auto& [name, value] :
         {std::pair<const char*, const std::string&>{"file", k.file()},
          {"slices", k.slices()},
          {"texts", k.texts()},
          {"tokenizer", k.tokenizer()}}) {
      if (!value.empty()) keys[name] = value;
    }
    if (!keys.empty()) j["longppl"]["key_tokens"] = keys;
  }
  if (e.niah().enabled()) {
    j["niah"] = {{"context_lengths",
                  std::vector<int64_t>(e.niah().context_lengths().begin(),
                                       e.niah().context_lengths().end())},
                 {"depths", std::vector<double>(e.niah().depths().begin(),
                                                e.niah().depths().end())},
                 {"samples", e.niah().samples()},
                 {"haystack", e.niah().haystack()}};
  }
  if (e.receptive_field().enabled()) {
    j["receptive_field"] = {{"limit", e.receptive_field().limit()}};
  }
  if (e.gradient_profile().enabled()) {
    j["gradient_profile"] = {{"sequences", e.gradient_profile().sequences()}};
  }
  if (e.probing().enabled()) {
    j["probing"] = {{"samples", e.probing().samples()},
                    {"context_length", e.probing().context_length()},
                    {"classes", e.probing().classes()}};
  }
  if (e.retrieval_heads().enabled()) {
    j["retrieval_heads"] = {
        {"samples", e.retrieval_heads().samples()},
        {"context_length", e.retrieval_heads().context_length()},
        {"top_heads", e.retrieval_heads().top_heads()}};
  }
  if (e.multiple_choice().enabled()) {
    j["multiple_choice"] = task::JsonFieldWriter::Write(
        MultipleChoiceSettings(e.multiple_choice()));
  }
  if (e.ruler().enabled()) {
    const auto& r = e.ruler();
    j["ruler"] = {
        {"tasks", std::vector<std::string>(r.tasks().begin(), r.tasks().end())},
        {"lengths",
         std::vector<int64_t>(r.lengths().begin(), r.lengths().end())},
        {"samples", r.samples()},
        {"tokens_to_generate", r.tokens_to_generate()},
        {"essay_file", r.essay_file()},
        {"squad_file", r.squad_file()},
        {"hotpotqa_file", r.hotpotqa_file()}};
  }
  return j.dump();
}

task::MultipleChoiceSpec MultipleChoiceSettings(
    const hlab::v1::MultipleChoiceSpec& spec) {
  task::MultipleChoiceSpec out;
  if (spec.has_seed()) out.seed = spec.seed();
  for (const hlab::v1::MultipleChoiceTask& t : spec.tasks()) {
    task::MultipleChoiceTaskSpec one;
    one.name = t.name();
    one.file = t.file();
    one.fewshot_file = t.fewshot_file();
    one.num_fewshot = t.num_fewshot();
    one.limit = t.limit();
    if (t.has_target_delimiter()) one.target_delimiter = t.target_delimiter();
    if (t.has_fewshot_delimiter()) {
      one.fewshot_delimiter = t.fewshot_delimiter();
    }
    out.tasks.push_back(std::move(one));
  }
  return out;
}

std::vector<std::string> EnabledEvals(const SweepSpec& spec) {
  const auto& e = spec.evaluation();
  const bool on[] = {e.validation_loss().enabled(),
                     e.longppl().enabled(),
                     e.niah().enabled(),
                     e.receptive_field().enabled(),
                     e.gradient_profile().enabled(),
                     e.probing().enabled(),
                     e.retrieval_heads().enabled(),
                     e.multiple_choice().enabled(),
                     e.ruler().enabled()};
  const std::vector<std::string>& names = hlab::task::AllEvalNames();
  constexpr size_t kEvals = sizeof(on) / sizeof(on[0]);
  static_assert(kEvals == 9, "one flag per evaluation");
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size() && i < kEvals; ++i) {
    if (on[i]) out.push_back(names[i]);
  }
  return out;
}

absl::StatusOr<std::string> EvalDraft(
    const std::string& task_id, const std::string& run_id, int64_t step,
    const std::string& settings, const std::string& run_config,
    const hlab::task::LongPplReference& reference) {
  hlab::task::EvalTask draft;
  draft.task_id = task_id;
  draft.run_id = run_id;
  draft.step = step;
  HLAB_ASSIGN_OR_RETURN(hlab::task::RunConfig run,
                        hlab::task::RunConfigFromJson(run_config));
  HLAB_ASSIGN_OR_RETURN(draft.run, hlab::task::TrainTaskForRun(run));
  HLAB_ASSIGN_OR_RETURN(nlohmann::json evals,
                        ParseJsonText(settings, "evaluation settings"));
  HLAB_RETURN_IF_ERROR(
      hlab::task::JsonFieldReader(evals, "evals", "docs/evaluation.md")
          .Read(&draft.evals));
  if (draft.evals.longppl) draft.evals.longppl->reference = reference;
  return hlab::task::JsonFieldWriter::Write(draft).dump();  // compact
}

std::string EvalTaskId(const std::string& run_id, int64_t step,
                       const std::string& settings) {
  return absl::StrCat(
      TaskKindName(hlab::v1::TASK_KIND_EVAL), "-",
      ShortHash(absl::StrCat("eval|", run_id, "@", step, "|", settings)));
}

std::string TaskKindName(hlab::v1::TaskKind kind) {
  switch (kind) {
    case hlab::v1::TASK_KIND_TRAIN:
      return "train";
    case hlab::v1::TASK_KIND_TRUNK:
      return "trunk";
    case hlab::v1::TASK_KIND_DECAY:
      return "decay";
    case hlab::v1::TASK_KIND_EVAL:
      return "eval";
    default:
      return "unspecified";
  }
}

namespace {

// The expansion of one spec: the plan it fills, and per run what the task
// planning needs beyond the run's proto (parallel to plan.runs).
struct Expansion {
  SweepPlan plan;
  std::vector<RunInfo> info;
  std::vector<std::string> configs;  // canonical run configs
  // EVAL tasks of branch checkpoints: (run, step, trunk task).
  struct BranchEval {
    int run;
    int64_t step;
    std::string trunk;
  };
  std::vector<BranchEval> branch_evals;
  // Training trajectories for evaluation.trajectory: the steps (from, to]
  // that `task` trains, as run `run`'s (a trunk: its longest run's).
  struct Trajectory {
    int run;
    int64_t from, to;
    std::string task;
  };
  std::vector<Trajectory> trajectories;
};

// Part 1: the runs, in (architecture, scale, budget, seed) order.
absl::Status ExpandRuns(Expansion& x) {
  const SweepSpec& spec = x.plan.spec;
  for (int a = 0; a < spec.architectures_size(); ++a) {
    const auto& arch = spec.architectures(a);
    for (int s = 0; s < spec.scales_size(); ++s) {
      const auto& scale = spec.scales(s);
      const SweepSpec scale_spec = SpecForScale(spec, scale);
      HLAB_ASSIGN_OR_RETURN(hlab::model::ModelConfig model,
                            ResolveModel(spec, arch, scale));
      const hlab::model::ParamCount count = hlab::model::CountParameters(model);
      const double fpt =
          hlab::model::TrainingFlopsPerToken(model, spec.seq_len());
      for (int b = 0; b < BudgetCount(scale_spec); ++b) {
        const int64_t tokens = BudgetTokens(scale_spec, b, count.non_embedding);
        for (int64_t seed : spec.seeds()) {
          Run run;
          const std::string config =
              CanonicalRunConfig(scale_spec, model, tokens, seed);
          run.set_run_id(ShortHash(config));
          run.set_architecture(arch.name());
          run.set_pattern(hlab::model::LayersToPattern(model.layers));
          run.set_scale(scale.name());
          run.set_seed(seed);
          run.set_non_embedding_params(count.non_embedding);
          run.set_total_params(count.total);
          run.set_tokens(tokens);
          if (b < scale_spec.budgets().tokens_per_param_size()) {
            run.set_tokens_per_param(scale_spec.budgets().tokens_per_param(b));
          }
          run.set_steps(tokens / scale_spec.batch_tokens());
          run.set_flops(fpt * static_cast<double>(tokens));
          run.set_state(hlab::v1::RUN_STATE_PENDING);
          run.set_config_json(config);
          RunInfo ri;
          ri.arch = a;
          ri.scale = s;
          ri.budget = b;
          ri.seed = seed;
          ri.steps = run.steps();
          ri.branch_step = DecayStartStep(scale_spec, ri.steps);
          ri.batch_tokens = scale_spec.batch_tokens();
          ri.flops_per_token = fpt;
          x.plan.runs.push_back(std::move(run));
          x.info.push_back(ri);
          x.configs.push_back(config);
        }
      }
    }
  }
  return absl::OkStatus();
}

// The trunk of the runs `members` (sorted by steps) as TRUNK tasks, each
// holding the runs whose prefix it trains as its runs and branch points.
// Returns per member (parallel to `members`) the trunk tasks its prefix
// needs, in training order.
//
// One task (the default order) trains steps [0, b_max) and saves a branch
// checkpoint at every run's decay start. With schedule_policy: adaptive the
// trunk is a chain of segments, one per distinct decay start b_1 < ... <
// b_m: segment k trains [b_(k-1), b_k) from segment k-1's branch checkpoint
// at b_(k-1) (segment 1 from scratch), saves the branch checkpoints at b_k,
// and depends on segment k-1, so the order can stop a trunk at any branch
// point (docs/sweeps.md, "Trunk segments"). A trunk with one decay start is
// one task either way.
std::vector<std::vector<std::string>> PlanTrunkTasks(
    Expansion& x, const std::vector<int>& members) {
  const SweepSpec& spec = x.plan.spec;
  SweepPlan& plan = x.plan;
  const RunInfo& last = x.info[members.back()];
  const std::string& scale = spec.scales(last.scale).name();
  const double fpt = last.flops_per_token;
  const double batch = static_cast<double>(last.batch_tokens);
  std::string trunk_key = "trunk";
  for (int m : members) {
    absl::StrAppend(&trunk_key, "|", plan.runs[m].run_id(), "@",
                    x.info[m].branch_step);
  }
  std::vector<int64_t> ends;  // the segments' end steps, ascending
  for (int m : members) {
    if (ends.empty() || ends.back() != x.info[m].branch_step) {
      ends.push_back(x.info[m].branch_step);
    }
  }
  if (spec.schedule_policy() != "adaptive") ends = {last.branch_step};
  std::vector<std::vector<std::string>> needs(members.size());
  std::string previous;
  int64_t start = 0;
  for (int64_t end : ends) {
    const bool whole = ends.size() == 1;
    Task trunk =
        NewTask(spec, hlab::v1::TASK_KIND_TRUNK,
                whole ? trunk_key
                      : absl::StrCat(trunk_key, "|segment ", start, "-", end),
                scale);
    if (!previous.empty()) AddDependency(&trunk, previous);
    trunk.set_start_step(start);
    trunk.set_end_step(end);
    trunk.set_flops(fpt * batch * static_cast<double>(end - start));
    for (size_t i = 0; i < members.size(); ++i) {
      const int m = members[i];
      if (!whole && x.info[m].branch_step < end) continue;  // decays before
      needs[i].push_back(trunk.task_id());
      trunk.add_run_ids(plan.runs[m].run_id());
      auto* bp = trunk.add_branch_points();
      bp->set_run_id(plan.runs[m].run_id());
      bp->set_step(x.info[m].branch_step);
      bp->set_tokens(x.info[m].branch_step * last.batch_tokens);
      // The branch checkpoints it writes: those at its end (every one of
      // a whole trunk's).
      if (x.info[m].branch_step <= end &&
          spec.evaluation().at_branch_points()) {
        x.branch_evals.push_back({m, x.info[m].branch_step, trunk.task_id()});
      }
    }
    // The largest run's config: its schedule is warmup + constant LR up
    // to b_max, exactly what every budget trains on before its decay.
    trunk.set_draft_json(
        TrainingTaskJson(spec, trunk, x.configs[members.back()]).dump());
    // Its trajectory is its longest run's; a segment's end, where it keeps
    // no checkpoint of that run, is the branch checkpoint's run's.
    if (whole) {
      x.trajectories.push_back({members.back(), start, end, trunk.task_id()});
    } else {
      x.trajectories.push_back(
          {members.back(), start, end - 1, trunk.task_id()});
      for (int m : members) {
        if (x.info[m].branch_step != end) continue;
        x.trajectories.push_back({m, end - 1, end, trunk.task_id()});
        break;
      }
    }
    previous = trunk.task_id();
    start = end;
    plan.tasks.push_back(std::move(trunk));
  }
  return needs;
}

// One shared trunk for the runs `members` (sorted by steps, two or more)
// and a DECAY task per run after the trunk tasks its prefix needs.
void PlanSharedTrunk(Expansion& x, const std::vector<int>& members) {
  const SweepSpec& spec = x.plan.spec;
  SweepPlan& plan = x.plan;
  const RunInfo& last = x.info[members.back()];
  const std::string& scale = spec.scales(last.scale).name();
  const double fpt = last.flops_per_token;
  const double batch = static_cast<double>(last.batch_tokens);
  const std::vector<std::vector<std::string>> needs =
      PlanTrunkTasks(x, members);
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    const Run& run = plan.runs[m];
    Task decay = NewTask(spec, hlab::v1::TASK_KIND_DECAY,
                         absl::StrCat("decay|", run.run_id()), scale);
    decay.add_run_ids(run.run_id());
    for (const std::string& trunk : needs[i]) AddDependency(&decay, trunk);
    decay.set_start_step(x.info[m].branch_step);
    decay.set_end_step(x.info[m].steps);
    decay.set_flops(
        fpt * batch *
        static_cast<double>(x.info[m].steps - x.info[m].branch_step));
    decay.set_draft_json(TrainingTaskJson(spec, decay, x.configs[m]).dump());
    x.info[m].final_task = decay.task_id();
    x.trajectories.push_back(
        {m, x.info[m].branch_step, x.info[m].steps, decay.task_id()});
    plan.tasks.push_back(decay);
  }
}

// Part 2: the training tasks, one group per (architecture, scale, seed): a
// shared trunk and its decays, or a TRAIN task per run; and the grid's
// training cost both ways.
void PlanTrainingTasks(Expansion& x) {
  const SweepSpec& spec = x.plan.spec;
  SweepPlan& plan = x.plan;
  std::map<std::tuple<int, int, int64_t>, std::vector<int>> groups;
  std::vector<std::tuple<int, int, int64_t>> group_order;
  for (size_t i = 0; i < x.info.size(); ++i) {
    const auto key =
        std::make_tuple(x.info[i].arch, x.info[i].scale, x.info[i].seed);
    if (groups.find(key) == groups.end()) group_order.push_back(key);
    groups[key].push_back(static_cast<int>(i));
  }
  for (const auto& key : group_order) {
    std::vector<int>& members = groups[key];
    std::sort(members.begin(), members.end(),
              [&](int a, int b) { return x.info[a].steps < x.info[b].steps; });
    const RunInfo& last = x.info[members.back()];
    // Shared: the trunk to the last decay start, then every decay.
    int64_t shared_steps = last.branch_step;
    for (int m : members) {
      plan.flops_unshared += plan.runs[m].flops();
      plan.tokens_unshared += plan.runs[m].tokens();
      shared_steps += x.info[m].steps - x.info[m].branch_step;
    }
    if (members.size() < 2) shared_steps = last.steps;
    plan.flops_shared += last.flops_per_token *
                         static_cast<double>(last.batch_tokens) *
                         static_cast<double>(shared_steps);
    plan.tokens_shared += shared_steps * last.batch_tokens;
    if (spec.share_trunk() && members.size() >= 2) {
      PlanSharedTrunk(x, members);
      continue;
    }
    const std::string& scale = spec.scales(last.scale).name();
    for (int m : members) {
      const Run& run = plan.runs[m];
      Task train = NewTask(spec, hlab::v1::TASK_KIND_TRAIN,
                           absl::StrCat("train|", run.run_id()), scale);
      train.add_run_ids(run.run_id());
      train.set_start_step(0);
      train.set_end_step(x.info[m].steps);
      train.set_flops(run.flops());
      train.set_draft_json(TrainingTaskJson(spec, train, x.configs[m]).dump());
      x.info[m].final_task = train.task_id();
      x.trajectories.push_back({m, 0, x.info[m].steps, train.task_id()});
      plan.tasks.push_back(train);
    }
  }
}

// The spec with only the evaluations evaluation.trajectory names enabled
// (all enabled ones when it names none): what a trajectory EVAL measures.
SweepSpec TrajectoryEvaluations(const SweepSpec& spec) {
  const auto& names = spec.evaluation().trajectory().evals();
  if (names.empty()) return spec;
  auto named = [&](const char* name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  SweepSpec out = spec;
  auto* e = out.mutable_evaluation();
  if (!named("val_loss")) e->mutable_validation_loss()->set_enabled(false);
  if (!named("longppl")) e->mutable_longppl()->set_enabled(false);
  if (!named("niah")) e->mutable_niah()->set_enabled(false);
  if (!named("receptive_field")) {
    e->mutable_receptive_field()->set_enabled(false);
  }
  if (!named("gradient_profile")) {
    e->mutable_gradient_profile()->set_enabled(false);
  }
  if (!named("probing")) e->mutable_probing()->set_enabled(false);
  if (!named("retrieval_heads")) {
    e->mutable_retrieval_heads()->set_enabled(false);
  }
  if (!named("multiple_choice")) {
    e->mutable_multiple_choice()->set_enabled(false);
  }
  if (!named("ruler")) e->mutable_ruler()->set_enabled(false);
  return out;
}

// Part 3: the EVAL tasks: one per run after its training, one per branch
// checkpoint with evaluation.at_branch_points, one per kept checkpoint with
// evaluation.trajectory; each also after the LongPPL reference run's
// training when that run is in the sweep and the task measures LongPPL.
absl::Status PlanEvalTasks(Expansion& x) {
  const SweepSpec& spec = x.plan.spec;
  SweepPlan& plan = x.plan;
  if (EnabledEvals(spec).empty()) return absl::OkStatus();
  const int reference = ReferenceRun(spec, plan.runs, x.info);
  // The LongPPL reference's training gates every EVAL task, and it is the
  // sweep's largest: leased first (one priority step up), evaluations run
  // beside the rest of the training instead of all after it.
  if (spec.evaluation().longppl().enabled() && reference >= 0) {
    const std::string& ref_id = plan.runs[reference].run_id();
    for (Task& t : plan.tasks) {
      if (std::find(t.run_ids().begin(), t.run_ids().end(), ref_id) !=
          t.run_ids().end()) {
        t.set_priority(spec.priority() + 1);
      }
    }
  }
  std::set<std::pair<size_t, int64_t>> planned;  // (run, step)
  // One EVAL task of run `i` at training step `step`, after `after`,
  // measuring what `measured` (the spec or TrajectoryEvaluations) enables.
  auto add_eval = [&](const SweepSpec& measured, size_t i, int64_t step,
                      const std::string& after) -> absl::Status {
    if (!planned.insert({i, step}).second) return absl::OkStatus();
    const auto& e = measured.evaluation();
    const std::string settings_text = EvaluationSettings(measured);
    const Run& run = plan.runs[i];
    Task task = NewTask(spec, hlab::v1::TASK_KIND_EVAL, "", run.scale());
    task.set_task_id(EvalTaskId(run.run_id(), step, settings_text));
    task.add_run_ids(run.run_id());
    AddDependency(&task, after);
    task.set_eval_step(step);
    for (const std::string& name : EnabledEvals(measured)) {
      task.add_evals(name);
    }
    hlab::task::LongPplReference r;
    if (e.longppl().enabled()) {
      const auto& ref = e.longppl().reference();
      if (reference >= 0) {
        r.run_id = plan.runs[reference].run_id();
        AddDependency(&task, x.info[reference].final_task);
      } else if (!ref.run_id().empty()) {
        r.run_id = ref.run_id();
      } else if (!ref.hf_dir().empty()) {
        r.hf_dir = ref.hf_dir();
        r.dtype = ref.dtype();
      } else {
        r.checkpoint_path = ref.checkpoint_path();
      }
    }
    HLAB_ASSIGN_OR_RETURN(std::string draft,
                          EvalDraft(task.task_id(), run.run_id(), step,
                                    settings_text, x.configs[i], r));
    task.set_draft_json(draft);
    plan.tasks.push_back(std::move(task));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    HLAB_RETURN_IF_ERROR(
        add_eval(spec, i, x.info[i].steps, x.info[i].final_task));
  }
  for (const Expansion::BranchEval& b : x.branch_evals) {
    HLAB_RETURN_IF_ERROR(
        add_eval(spec, static_cast<size_t>(b.run), b.step, b.trunk));
  }
  const int64_t every = spec.evaluation().trajectory().every_steps();
  if (every <= 0) return absl::OkStatus();
  int64_t count = 0;
  for (const Expansion::Trajectory& t : x.trajectories) {
    count += t.to / every - t.from / every;
  }
  HLAB_RETURN_IF_ERROR(internal::AtMost("evaluation.trajectory.every_steps",
                                        count, kMaxTrajectoryEvals,
                                        "trajectory evaluations"));
  const SweepSpec measured = TrajectoryEvaluations(spec);
  for (const Expansion::Trajectory& t : x.trajectories) {
    for (int64_t step = (t.from / every + 1) * every; step <= t.to;
         step += every) {
      HLAB_RETURN_IF_ERROR(
          add_eval(measured, static_cast<size_t>(t.run), step, t.task));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SweepPlan> PlanSweep(const SweepSpec& raw) {
  HLAB_RETURN_IF_ERROR(ValidateSweepSpec(raw));
  Expansion x;
  x.plan.spec = WithDefaults(raw);
  x.plan.spec_hash = SpecHash(x.plan.spec);
  HLAB_RETURN_IF_ERROR(ExpandRuns(x));
  PlanTrainingTasks(x);
  HLAB_RETURN_IF_ERROR(PlanEvalTasks(x));
  return std::move(x.plan);
}

}  // namespace hlab::sweep
