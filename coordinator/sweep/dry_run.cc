#include "coordinator/sweep/dry_run.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"

namespace hlab::sweep {
namespace {

// A left-aligned text table with a header row and a rule under it.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const std::string& cell = rows[r][c];
      line += cell;
      if (c + 1 < rows[r].size())
        line += std::string(width[c] - cell.size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      absl::StrAppend(&out, std::string(total - 2, '-'), "\n");
    }
  }
  return out;
}

// One row per (architecture, scale): N, its ratio to the Full backbone of
// the scale, and what appendix B set (DescribeMatch).
std::string RenderModels(const SweepPlan& plan) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"architecture", "scale", "N", "N / Full", "matched"});
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& run : plan.runs) {
    if (!seen.emplace(run.architecture(), run.scale()).second) continue;
    const nlohmann::json config = nlohmann::json::parse(
        run.config_json(), nullptr, /*allow_exceptions=*/false);
    if (!config.is_object() || !config.contains("model")) continue;
    absl::StatusOr<hlab::model::ModelConfig> model =
        hlab::model::ModelConfigFromJson(config["model"].dump());
    if (!model.ok()) continue;
    const int64_t n = hlab::model::CountParameters(*model).non_embedding;
    const int64_t full =
        hlab::model::CountParameters(hlab::model::FullBackbone(*model))
            .non_embedding;
    const std::string matched = hlab::model::DescribeMatch(*model);
    rows.push_back({run.architecture(), run.scale(), absl::StrCat(n),
                    absl::StrFormat("%.4f", static_cast<double>(n) /
                                                static_cast<double>(full)),
                    matched.empty() ? "-" : matched});
  }
  return RenderTable(rows);
}

}  // namespace

std::string FormatScientific(double value) {
  return absl::StrFormat("%.3e", value);
}

std::string RenderDryRun(const SweepPlan& plan) {
  const auto& spec = plan.spec;
  std::string out =
      absl::StrCat("sweep '", spec.name(), "' (spec hash ", plan.spec_hash,
                   "): ", spec.architectures_size(), " architectures, ",
                   spec.scales_size(), " scales, ", spec.seeds_size(),
                   spec.seeds_size() == 1 ? " seed" : " seeds", ": ",
                   plan.runs.size(), " runs\n\n");
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"architecture", "scale", "N", "D", "D/N", "steps", "FLOPs",
                  "seed", "run id"});
  for (const auto& run : plan.runs) {
    const double ratio = static_cast<double>(run.tokens()) /
                         static_cast<double>(run.non_embedding_params());
    rows.push_back({run.architecture(), run.scale(),
                    absl::StrCat(run.non_embedding_params()),
                    absl::StrCat(run.tokens()), absl::StrFormat("%.1f", ratio),
                    absl::StrCat(run.steps()), FormatScientific(run.flops()),
                    absl::StrCat(run.seed()), run.run_id()});
  }
  absl::StrAppend(&out, RenderTable(rows), "\n");
  absl::StrAppend(&out, "models (appendix B matching",
                  spec.match_params() ? "" : " off: match_params is false",
                  "):\n", RenderModels(plan), "\n");

  std::map<std::string, int> kinds;
  for (const auto& task : plan.tasks) ++kinds[TaskKindName(task.kind())];
  std::string summary;
  for (const char* kind : {"train", "trunk", "decay", "eval"}) {
    if (kinds[kind] == 0) continue;
    absl::StrAppend(&summary, summary.empty() ? "" : ", ", kinds[kind], " ",
                    kind);
  }
  absl::StrAppend(&out, "tasks: ", summary,
                  " (share_trunk: ", spec.share_trunk() ? "true" : "false",
                  ")\n");
  const double saved = plan.flops_unshared - plan.flops_shared;
  const double percent =
      plan.flops_unshared > 0 ? 100.0 * saved / plan.flops_unshared : 0.0;
  absl::StrAppend(&out, "total training compute with WSD trunk sharing:    ",
                  FormatScientific(plan.flops_shared), " FLOPs",
                  spec.share_trunk() ? " (planned)" : "", "\n",
                  "total training compute without WSD trunk sharing: ",
                  FormatScientific(plan.flops_unshared), " FLOPs",
                  spec.share_trunk() ? "" : " (planned)", "\n",
                  "saving from trunk sharing: ", FormatScientific(saved),
                  " FLOPs (", absl::StrFormat("%.1f", percent), "%)\n",
                  "training tokens: ", plan.tokens_shared, " with sharing, ",
                  plan.tokens_unshared, " without\n");
  return out;
}

hlab::v1::SubmitSweepResponse DryRunResponse(const SweepPlan& plan) {
  hlab::v1::SubmitSweepResponse response;
  hlab::v1::Sweep* sweep = response.mutable_sweep();
  sweep->set_name(plan.spec.name());
  *sweep->mutable_spec() = plan.spec;
  sweep->set_spec_hash(plan.spec_hash);
  sweep->set_runs_total(static_cast<int64_t>(plan.runs.size()));
  sweep->set_runs_pending(static_cast<int64_t>(plan.runs.size()));
  sweep->set_flops_planned(plan.spec.share_trunk() ? plan.flops_shared
                                                   : plan.flops_unshared);
  response.set_created(false);
  for (const auto& run : plan.runs) *response.add_runs() = run;
  for (const auto& task : plan.tasks) *response.add_tasks() = task;
  response.set_flops_shared(plan.flops_shared);
  response.set_flops_unshared(plan.flops_unshared);
  response.set_tokens_shared(plan.tokens_shared);
  response.set_tokens_unshared(plan.tokens_unshared);
  return response;
}

std::string DryRunJson(const SweepPlan& plan) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(DryRunResponse(plan), &out,
                                                    options);
  return out;
}

}  // namespace hlab::sweep
