// The RULER suite's evaluation (eval/ruler/ruler.h).
#include "eval/ruler/ruler.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace hlab::eval::ruler {

absl::Status ValidateRulerConfig(const RulerConfig& config) {
  std::set<std::string> seen;
  for (size_t i = 0; i < config.tasks.size(); ++i) {
    const std::string field = absl::StrCat("tasks[", i, "]");
    absl::StatusOr<RulerTaskInfo> t = FindRulerTask(config.tasks[i]);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", t.status().message()));
    }
    if (!seen.insert(config.tasks[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", config.tasks[i], "\" is listed twice"));
    }
  }
  if (config.lengths.empty()) {
    return absl::InvalidArgumentError(
        "lengths: give at least one length in tokens");
  }
  for (size_t i = 0; i < config.lengths.size(); ++i) {
    if (config.lengths[i] < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lengths[", i, "]: ", config.lengths[i], " is below 2 tokens"));
    }
  }
  if (config.samples < 1) {
    return absl::InvalidArgumentError("samples: must be at least 1");
  }
  if (config.tokens_to_generate < 0) {
    return absl::InvalidArgumentError(
        "tokens_to_generate: must be >= 0 (0: each task's)");
  }
  return absl::OkStatus();
}

namespace {

// What `t` needs that `sources` lacks, or "".
std::string Missing(const RulerTaskInfo& t, const RulerSources& sources) {
  if (t.needs == "essay" && sources.essay.empty()) {
    return "an essay haystack (essay_file)";
  }
  if (t.needs == "squad" && !sources.squad) return "a SQuAD file (squad_file)";
  if (t.needs == "hotpotqa" && !sources.hotpotqa) {
    return "a HotpotQA file (hotpotqa_file)";
  }
  return "";
}

std::string Lower(const std::string& s) { return absl::AsciiStrToLower(s); }

}  // namespace

absl::StatusOr<std::vector<RulerTaskInfo>> ResolveRulerTasks(
    const RulerConfig& config, const RulerSources& sources,
    std::vector<std::string>* skipped) {
  std::vector<RulerTaskInfo> out;
  if (!config.tasks.empty()) {
    for (size_t i = 0; i < config.tasks.size(); ++i) {
      HLAB_ASSIGN_OR_RETURN(RulerTaskInfo t, FindRulerTask(config.tasks[i]));
      const std::string missing = Missing(t, sources);
      if (!missing.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tasks[", i, "]: ", t.name, " needs ", missing));
      }
      out.push_back(t);
    }
    return out;
  }
  for (const RulerTaskInfo& t : RulerTasks()) {
    const std::string missing = Missing(t, sources);
    if (missing.empty()) {
      out.push_back(t);
    } else if (skipped != nullptr) {
      skipped->push_back(absl::StrCat(t.name, ": needs ", missing));
    }
  }
  return out;
}

double StringMatchAll(const std::string& prediction,
                      const std::vector<std::string>& references) {
  if (references.empty()) return 0;
  const std::string p = Lower(prediction);
  double found = 0;
  for (const std::string& r : references) {
    if (p.find(Lower(r)) != std::string::npos) found += 1;
  }
  return found / static_cast<double>(references.size());
}

double StringMatchPart(const std::string& prediction,
                       const std::vector<std::string>& references) {
  const std::string p = Lower(prediction);
  for (const std::string& r : references) {
    if (p.find(Lower(r)) != std::string::npos) return 1;
  }
  return 0;
}

std::string PostprocessPrediction(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '\n';
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

absl::StatusOr<RulerResult> EvaluateRuler(TokenScorer& scorer,
                                          const data::Tokenizer& tokenizer,
                                          const RulerConfig& config,
                                          const RulerSources& sources,
                                          const RulerProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  HLAB_RETURN_IF_ERROR(ValidateRulerConfig(config));
  RulerResult result;
  HLAB_ASSIGN_OR_RETURN(std::vector<RulerTaskInfo> tasks,
                        ResolveRulerTasks(config, sources, &result.skipped));
  if (tasks.empty()) {
    return absl::InvalidArgumentError(
        "tasks: no RULER task can run without its sources");
  }
  // Every sample first. A task the config names fails the evaluation when a
  // length cannot hold it; one chosen by default skips that length.
  struct Cell {
    const RulerTaskInfo* task;
    int64_t length;
    std::vector<RulerSample> samples;
  };
  std::vector<Cell> cells;
  for (const RulerTaskInfo& t : tasks) {
    for (int64_t length : config.lengths) {
      Cell cell{&t, length, {}};
      for (int64_t i = 0; i < config.samples; ++i) {
        absl::StatusOr<RulerSample> s =
            MakeRulerSample(t, length, config.seed, i, tokenizer, sources,
                            config.tokens_to_generate);
        if (!s.ok() && config.tasks.empty() &&
            absl::IsInvalidArgument(s.status())) {
          result.skipped.push_back(
              absl::StrCat(t.name, " at ", length, ": ", s.status().message()));
          cell.samples.clear();
          break;
        }
        if (!s.ok()) return s.status();
        cell.samples.push_back(*std::move(s));
      }
      if (!cell.samples.empty()) cells.push_back(std::move(cell));
    }
  }
  if (cells.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lengths: no RULER task fits them (",
                     absl::StrJoin(result.skipped, "; "), ")"));
  }
  const int64_t total = static_cast<int64_t>(cells.size()) * config.samples;
  int64_t done = 0;
  std::map<std::string, std::pair<double, int>> per_task;
  std::vector<std::string> order;
  for (const Cell& c : cells) {
    RulerCell cell;
    cell.task = c.task->name;
    cell.length = c.length;
    double sum = 0;
    for (const RulerSample& s : c.samples) {
      GenerateOptions options;
      options.max_new_tokens = s.tokens_to_generate;
      HLAB_ASSIGN_OR_RETURN(std::vector<int32_t> out,
                            scorer.Generate(s.prompt, options));
      result.generated_tokens += static_cast<int64_t>(out.size());
      const std::string prediction =
          PostprocessPrediction(tokenizer.Decode(out));
      const double score = c.task->metric == "part"
                               ? StringMatchPart(prediction, s.answers)
                               : StringMatchAll(prediction, s.answers);
      if (cell.samples == 0) {
        cell.example_prediction = prediction;
        cell.example_answers = s.answers;
      }
      sum += score;
      ++cell.samples;
      if (progress) progress(++done, total);
    }
    cell.score = sum / static_cast<double>(cell.samples);
    auto& [task_sum, task_cells] = per_task[cell.task];
    if (task_cells == 0) order.push_back(cell.task);
    task_sum += cell.score;
    ++task_cells;
    result.cells.push_back(std::move(cell));
  }
  for (const std::string& name : order) {
    result.tasks[name] = per_task[name].first / per_task[name].second;
    result.score += result.tasks[name];
  }
  result.score /= static_cast<double>(order.size());
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

std::string RulerResultToJson(const RulerResult& result) {
  nlohmann::json j;
  j["score"] = result.score;
  j["tasks"] = result.tasks;
  j["cells"] = nlohmann::json::array();
  for (const RulerCell& c : result.cells) {
    j["cells"].push_back({{"task", c.task},
                          {"length", c.length},
                          {"samples", c.samples},
                          {"score", c.score},
                          {"example_prediction", c.example_prediction},
                          {"example_answers", c.example_answers}});
  }
  j["skipped"] = result.skipped;
  j["generated_tokens"] = result.generated_tokens;
  j["seconds"] = result.seconds;
  return j.dump();
}

}  // namespace hlab::eval::ruler
