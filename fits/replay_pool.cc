#include "fits/replay_pool.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hlab::fits {
namespace {

bool IsTraining(hlab::v1::TaskKind kind) {
  return kind == hlab::v1::TASK_KIND_TRAIN ||
         kind == hlab::v1::TASK_KIND_TRUNK || kind == hlab::v1::TASK_KIND_DECAY;
}

// Run id -> position of its last training task in the order one worker
// leases them (store.cc: priority DESC, cost_flops, id among ready tasks).
std::map<std::string, int64_t> LeaseRanks(const sweep::SweepPlan& plan) {
  std::vector<const hlab::v1::Task*> pending;
  std::set<std::string> training_ids;
  for (const hlab::v1::Task& t : plan.tasks) {
    if (!IsTraining(t.kind())) continue;
    pending.push_back(&t);
    training_ids.insert(t.task_id());
  }
  std::set<std::string> done;
  std::map<std::string, int64_t> rank;
  int64_t position = 0;
  while (!pending.empty()) {
    auto ready = [&](const hlab::v1::Task* t) {
      for (const std::string& dep : t->depends_on()) {
        if (training_ids.count(dep) && !done.count(dep)) return false;
      }
      return true;
    };
    auto best = pending.end();
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      if (!ready(*it)) continue;
      if (best == pending.end() ||
          std::make_tuple(-(*it)->priority(), (*it)->flops(),
                          (*it)->task_id()) <
              std::make_tuple(-(*best)->priority(), (*best)->flops(),
                              (*best)->task_id())) {
        best = it;
      }
    }
    if (best == pending.end()) break;  // a cycle; the planner makes none
    const hlab::v1::Task* t = *best;
    pending.erase(best);
    done.insert(t->task_id());
    if (t->kind() != hlab::v1::TASK_KIND_TRUNK) {
      for (const std::string& run : t->run_ids()) rank[run] = position;
    }
    ++position;
  }
  return rank;
}

// Splits one CSV line; fields may be quoted ("a,b", "" for a quote).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ReplayPool> BuildReplayPool(
    const sweep::SweepPlan& plan, const MeasuredValues& measured,
    const std::vector<std::string>& target_scales) {
  std::set<std::string> scales;
  for (const auto& s : plan.spec.scales()) scales.insert(s.name());
  for (const std::string& s : target_scales) {
    if (!scales.count(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("target scale '", s, "' is not a scale of the sweep (",
                       absl::StrJoin(scales, ", "), ")"));
    }
  }
  std::set<int64_t> seeds;
  for (const hlab::v1::Run& r : plan.runs) seeds.insert(r.seed());
  if (seeds.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sweep has ", seeds.size(),
                     " seeds; replay schedules one seed's grid"));
  }
  // Per run: its trunk (task id and FLOPs to its branch point) and own part.
  struct Costs {
    std::string trunk;
    double trunk_flops = 0;
    double own_flops = 0;
  };
  std::map<std::string, Costs> costs;
  // A trunk in segments (schedule_policy: adaptive) is one trunk, named by
  // its first segment: a run's share is each segment's steps up to its
  // branch point.
  std::map<std::string, std::string> first_segment;
  for (const hlab::v1::Task& t : plan.tasks) {
    switch (t.kind()) {
      case hlab::v1::TASK_KIND_TRUNK: {
        std::string head = t.task_id();
        if (t.depends_on_size() > 0 && first_segment.count(t.depends_on(0))) {
          head = first_segment[t.depends_on(0)];
        }
        first_segment[t.task_id()] = head;
        const int64_t steps = t.end_step() - t.start_step();
        for (const auto& bp : t.branch_points()) {
          Costs& c = costs[bp.run_id()];
          c.trunk = head;
          const int64_t mine =
              std::min(bp.step(), t.end_step()) - t.start_step();
          c.trunk_flops += steps > 0 ? t.flops() * static_cast<double>(mine) /
                                           static_cast<double>(steps)
                                     : 0;
        }
        break;
      }
      case hlab::v1::TASK_KIND_DECAY:
      case hlab::v1::TASK_KIND_TRAIN:
        for (const std::string& run : t.run_ids()) {
          costs[run].own_flops += t.flops();
        }
        break;
      default:
        break;
    }
  }
  const std::map<std::string, int64_t> rank = LeaseRanks(plan);
  const std::set<std::string> targets(target_scales.begin(),
                                      target_scales.end());
  ReplayPool pool;
  for (const hlab::v1::Run& r : plan.runs) {
    ++pool.planned;
    auto value = measured.find({r.architecture(), r.scale(), r.tokens()});
    if (value == measured.end()) continue;
    ++pool.measured;
    analysis::ReplayRun run;
    run.run_id = r.run_id();
    run.arch = r.architecture();
    run.n = static_cast<double>(r.non_embedding_params());
    run.d = static_cast<double>(r.tokens());
    run.value = value->second;
    run.target = targets.count(r.scale()) > 0;
    const Costs& c = costs[r.run_id()];
    run.trunk = c.trunk;
    run.trunk_flops = c.trunk_flops;
    run.own_flops = c.own_flops;
    auto k = rank.find(r.run_id());
    run.default_rank = k == rank.end() ? pool.planned : k->second;
    pool.runs.push_back(std::move(run));
  }
  if (pool.runs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "none of the sweep's ", pool.planned,
        " planned runs has a measured value (matched by architecture, scale "
        "and tokens)"));
  }
  return pool;
}

MeasuredValues MeasuredFromRuns(const std::vector<RunFigures>& runs,
                                const std::string& target) {
  MeasuredValues out;
  for (const RunFigures& r : runs) {
    if (!r.succeeded()) continue;
    const std::optional<double> v = r.Target(target);
    if (!v) continue;
    out[{r.arch, r.scale, static_cast<int64_t>(std::llround(r.d))}] = *v;
  }
  return out;
}

absl::StatusOr<MeasuredValues> ReadMeasuredCsv(const std::string& path,
                                               const std::string& target) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  if (!std::getline(in, line)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  }
  const std::vector<std::string> header = SplitCsv(line);
  auto column = [&](const std::string& name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  const int arch = column("architecture"), scale = column("scale"),
            d = column("D"), state = column("state"),
            final_loss = column("final_loss"), val_loss = column("val_loss"),
            longppl = column("log_longppl");
  for (const auto& [name, index] :
       {std::pair<const char*, int>{"architecture", arch},
        {"scale", scale},
        {"D", d},
        {target == "longppl" ? "log_longppl" : "final_loss",
         target == "longppl" ? longppl : final_loss}}) {
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":1: no column '", name, "'"));
    }
  }
  MeasuredValues out;
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::vector<std::string> f = SplitCsv(line);
    auto field = [&](int i) -> std::string {
      return i >= 0 && i < static_cast<int>(f.size()) ? f[i] : std::string();
    };
    if (state >= 0 && field(state) != "SUCCEEDED") continue;
    auto number = [&](int i, const char* name,
                      double* x) -> absl::StatusOr<bool> {
      const std::string s = field(i);
      if (s.empty()) return false;
      if (!absl::SimpleAtod(s, x) || !std::isfinite(*x)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number,
                                                       ": column ", name, ": '",
                                                       s, "' is not a number"));
      }
      return true;
    };
    double tokens = 0, value = 0;
    absl::StatusOr<bool> has_d = number(d, "D", &tokens);
    if (!has_d.ok()) return has_d.status();
    if (!*has_d) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": column D is empty"));
    }
    absl::StatusOr<bool> has_value = false;
    if (target == "longppl") {
      has_value = number(longppl, "log_longppl", &value);
    } else {
      has_value = number(val_loss, "val_loss", &value);
      if (has_value.ok() && !*has_value) {
        has_value = number(final_loss, "final_loss", &value);
      }
    }
    if (!has_value.ok()) return has_value.status();
    if (!*has_value) continue;
    out[{field(arch), field(scale),
         static_cast<int64_t>(std::llround(tokens))}] = value;
  }
  return out;
}

}  // namespace hlab::fits
