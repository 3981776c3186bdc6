#include "eval/multiple_choice.h"
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "data/random.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;

// Questions scored per ScoreBatch call (their choices together).
constexpr size_t kQuestionsPerBatch = 16;

absl::Status LineError(const std::string& path, int64_t line,
                       const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ":", line, ": ", message));
}

absl::StatusOr<McDocument> ParseLine(absl::string_view text,
                                     const std::string& path, int64_t line) {
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return LineError(path, line, absl::StrCat("not JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return LineError(path, line,
                     "must be a JSON object {\"context\": ..., \"choices\": "
                     "[...], \"gold\": N}");
  }
  McDocument d;
  d.line = line;
  const auto context = j.find("context");
  if (context == j.end() || !context->is_string()) {
    return LineError(path, line,
                     "context: must be a string (lm-eval's doc_to_text)");
  }
  d.context = context->get<std::string>();
  const auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) {
    return LineError(path, line,
                     "choices: no choices (a non-empty array of strings, "
                     "lm-eval's doc_to_choice)");
  }
  for (size_t c = 0; c < choices->size(); ++c) {
    const Json& choice = (*choices)[c];
    if (!choice.is_string() || choice.get<std::string>().empty()) {
      return LineError(path, line,
                       absl::StrCat("choices[", c,
                                    "]: must be a non-empty string (acc_norm "
                                    "divides by its length)"));
    }
    d.choices.push_back(choice.get<std::string>());
  }
  const auto gold = j.find("gold");
  if (gold == j.end() || !HoldsInteger<int64_t>(*gold)) {
    return LineError(path, line,
                     "gold: must be the answer's index in choices, an "
                     "integer (lm-eval's doc_to_target)");
  }
  d.gold = gold->get<int64_t>();
  if (d.gold < 0 || d.gold >= static_cast<int64_t>(d.choices.size())) {
    return LineError(
        path, line,
        absl::StrCat("gold: index ", d.gold, " is out of range: there are ",
                     d.choices.size(), " choices (0 to ", d.choices.size() - 1,
                     ")"));
  }
  return d;
}

// The canonical path, or `path` itself when it cannot be resolved.
std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return path;
  return resolved;
}

// lm-eval's HFLM._encode_pair: trailing whitespace moves to the
// continuation; the continuation's tokens follow the context's count in the
// encoding of the whole.
std::vector<int32_t> ContinuationTokens(const data::Tokenizer& tokenizer,
                                        absl::string_view context,
                                        const std::string& continuation,
                                        std::vector<int32_t>* context_ids) {
  size_t end = context.size();
  while (end > 0 &&
         absl::ascii_isspace(static_cast<unsigned char>(context[end - 1]))) {
    --end;
  }
  const absl::string_view kept = context.substr(0, end);
  const std::string moved = absl::StrCat(context.substr(end), continuation);
  *context_ids = tokenizer.Encode(kept);
  const std::vector<int32_t> whole =
      tokenizer.Encode(absl::StrCat(kept, moved));
  if (whole.size() <= context_ids->size()) return {};
  return std::vector<int32_t>(
      whole.begin() + static_cast<std::ptrdiff_t>(context_ids->size()),
      whole.end());
}

absl::Status ValidateConfig(const McTaskConfig& c) {
  if (c.name.empty()) {
    return absl::InvalidArgumentError("name: must not be empty");
  }
  if (c.file.empty()) {
    return absl::InvalidArgumentError(
        "file: is required (a JSONL task file, one question a line)");
  }
  if (c.num_fewshot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_fewshot: must be >= 0, got ", c.num_fewshot));
  }
  if (c.limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must be >= 0, got ", c.limit));
  }
  if (c.num_fewshot > 0 && c.fewshot_file.empty()) {
    return absl::InvalidArgumentError(
        "fewshot_file: is required with num_fewshot > 0 (the file the "
        "examples are drawn from; it may be the task file itself)");
  }
  return absl::OkStatus();
}

// argmax over `score` (the first maximum, as numpy's).
int64_t ArgMax(const std::vector<double>& score) {
  int64_t best = 0;
  for (size_t c = 1; c < score.size(); ++c) {
    if (score[c] > score[static_cast<size_t>(best)]) {
      best = static_cast<int64_t>(c);
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<McDocument>> ParseMcDocuments(
    absl::string_view text, const std::string& path) {
  std::vector<McDocument> docs;
  int64_t line = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == absl::string_view::npos) end = text.size();
    ++line;
    const absl::string_view row = text.substr(begin, end - begin);
    begin = end + 1;
    if (absl::StripAsciiWhitespace(row).empty()) continue;
    HLAB_ASSIGN_OR_RETURN(McDocument d, ParseLine(row, path, line));
    docs.push_back(std::move(d));
  }
  if (docs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": no questions (one JSON object a line: {\"context\": ..., "
        "\"choices\": [...], \"gold\": N})"));
  }
  return docs;
}

absl::StatusOr<std::vector<McDocument>> ReadMcDocuments(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read the multiple-choice task file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  return ParseMcDocuments(text.str(), path);
}

int64_t Utf8Characters(absl::string_view text) {
  int64_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::vector<const McDocument*> McFewshotExamples(
    const std::vector<McDocument>& pool, int64_t num_fewshot, uint64_t seed,
    int64_t index, int64_t exclude) {
  std::vector<size_t> candidates;
  candidates.reserve(pool.size());
  for (size_t i = 0; i < pool.size(); ++i) {
    if (static_cast<int64_t>(i) != exclude) candidates.push_back(i);
  }
  data::Rng rng(data::MixSeeds(seed, static_cast<uint64_t>(index)));
  std::vector<const McDocument*> out;
  const int64_t n = static_cast<int64_t>(candidates.size());
  for (int64_t k = 0; k < num_fewshot && k < n; ++k) {
    const int64_t j = k + rng.Uniform(n - k);
    std::swap(candidates[static_cast<size_t>(k)],
              candidates[static_cast<size_t>(j)]);
    out.push_back(&pool[candidates[static_cast<size_t>(k)]]);
  }
  return out;
}

std::string McContext(const McDocument& doc,
                      const std::vector<const McDocument*>& examples,
                      const McTaskConfig& config) {
  std::string context;
  for (const McDocument* e : examples) {
    absl::StrAppend(&context, e->context, config.target_delimiter,
                    e->choices[static_cast<size_t>(e->gold)],
                    config.fewshot_delimiter);
  }
  absl::StrAppend(&context, doc.context);
  return context;
}

absl::StatusOr<McPreparedTask> PrepareMcTask(const McTaskConfig& config,
                                             const data::Tokenizer& tokenizer,
                                             int64_t max_tokens) {
  HLAB_RETURN_IF_ERROR(ValidateConfig(config));
  HLAB_ASSIGN_OR_RETURN(std::vector<McDocument> docs,
                        ReadMcDocuments(config.file));
  if (config.limit > 0 && static_cast<int64_t>(docs.size()) > config.limit) {
    docs.resize(static_cast<size_t>(config.limit));
  }
  McPreparedTask task;
  task.config = config;
  std::vector<McDocument> pool;
  bool same_file = false;
  if (!config.fewshot_file.empty()) {
    HLAB_ASSIGN_OR_RETURN(pool, ReadMcDocuments(config.fewshot_file));
    task.fewshot_pool = static_cast<int64_t>(pool.size());
    same_file = Canonical(config.fewshot_file) == Canonical(config.file);
    const int64_t available = task.fewshot_pool - (same_file ? 1 : 0);
    if (config.num_fewshot > available) {
      return absl::InvalidArgumentError(absl::StrCat(
          "num_fewshot: ", config.num_fewshot, " examples asked, but ",
          config.fewshot_file, " holds ", available,
          same_file ? " questions besides the one asked" : " questions"));
    }
  }
  const int32_t separator = tokenizer.vocabulary().end_of_document;
  for (size_t i = 0; i < docs.size(); ++i) {
    const McDocument& doc = docs[i];
    const int64_t index = static_cast<int64_t>(i);
    const std::string context =
        McContext(doc,
                  McFewshotExamples(pool, config.num_fewshot, config.seed,
                                    index, same_file ? index : -1),
                  config);
    McRequest r;
    r.line = doc.line;
    r.gold = doc.gold;
    std::vector<int32_t> context_ids;
    for (size_t c = 0; c < doc.choices.size(); ++c) {
      std::vector<int32_t> continuation = ContinuationTokens(
          tokenizer, context,
          absl::StrCat(config.target_delimiter, doc.choices[c]), &context_ids);
      if (continuation.empty()) {
        return LineError(config.file, doc.line,
                         absl::StrCat("choices[", c,
                                      "] encodes to no token after the "
                                      "context"));
      }
      const int64_t tokens =
          static_cast<int64_t>(context_ids.size() + continuation.size());
      if (max_tokens > 0 && tokens > max_tokens) {
        return LineError(
            config.file, doc.line,
            absl::StrCat("the context and choices[", c, "] take ", tokens,
                         " tokens",
                         config.num_fewshot > 0
                             ? absl::StrCat(" (with ", config.num_fewshot,
                                            " few-shot examples)")
                             : "",
                         ", more than the model's context of ", max_tokens,
                         " tokens: shorten the question or use fewer "
                         "few-shot examples"));
      }
      task.longest_tokens = std::max(task.longest_tokens, tokens);
      r.continuations.push_back(std::move(continuation));
      r.choice_chars.push_back(Utf8Characters(doc.choices[c]));
    }
    r.context.reserve(context_ids.size() + 1);
    r.context.push_back(separator);
    r.context.insert(r.context.end(), context_ids.begin(), context_ids.end());
    task.requests.push_back(std::move(r));
  }
  return task;
}

std::optional<double> McStderr(double p, int64_t n) {
  if (n < 2) return std::nullopt;
  return std::sqrt(p * (1 - p) / static_cast<double>(n - 1));
}

absl::StatusOr<McTaskResult> ScoreMcTask(TokenScorer& scorer,
                                         const McPreparedTask& task,
                                         const McProgress& progress) {
  const McTaskConfig& config = task.config;
  McTaskResult result;
  result.name = config.name;
  result.file = config.file;
  result.fewshot_file = config.fewshot_file;
  result.num_fewshot = config.num_fewshot;
  result.seed = config.seed;
  result.target_delimiter = config.target_delimiter;
  result.fewshot_delimiter = config.fewshot_delimiter;
  const size_t total = task.requests.size();
  for (size_t begin = 0; begin < total; begin += kQuestionsPerBatch) {
    const size_t end = std::min(total, begin + kQuestionsPerBatch);
    std::vector<std::vector<int32_t>> seqs;
    for (size_t q = begin; q < end; ++q) {
      const McRequest& r = task.requests[q];
      for (const std::vector<int32_t>& cont : r.continuations) {
        std::vector<int32_t> s = r.context;
        s.insert(s.end(), cont.begin(), cont.end());
        seqs.push_back(std::move(s));
      }
    }
    const std::vector<std::vector<float>> nll = scorer.ScoreBatch(seqs);
    if (nll.size() != seqs.size()) {
      return absl::InternalError(
          absl::StrCat("multiple_choice: the scorer returned ", nll.size(),
                       " results for ", seqs.size(), " sequences"));
    }
    size_t k = 0;
    for (size_t q = begin; q < end; ++q) {
      const McRequest& r = task.requests[q];
      McQuestionScore score;
      score.line = r.line;
      score.gold = r.gold;
      std::vector<double> normalized;
      for (size_t c = 0; c < r.continuations.size(); ++c, ++k) {
        if (nll[k].size() + 1 != seqs[k].size()) {
          return absl::InternalError(absl::StrCat(
              "multiple_choice: the scorer returned ", nll[k].size(),
              " NLLs for a sequence of ", seqs[k].size(), " tokens"));
        }
        const size_t n = r.continuations[c].size();
        double ll = 0;
        for (size_t i = nll[k].size() - n; i < nll[k].size(); ++i) {
          ll -= nll[k][i];
        }
        score.loglikelihood.push_back(ll);
        normalized.push_back(ll / static_cast<double>(r.choice_chars[c]));
        result.tokens += static_cast<int64_t>(n);
        ++result.sequences;
      }
      score.pred = ArgMax(score.loglikelihood);
      score.pred_norm = ArgMax(normalized);
      result.correct += score.pred == r.gold ? 1 : 0;
      result.correct_norm += score.pred_norm == r.gold ? 1 : 0;
      result.scores.push_back(std::move(score));
    }
    if (progress) {
      progress(static_cast<int64_t>(end), static_cast<int64_t>(total));
    }
  }
  result.questions = static_cast<int64_t>(total);
  if (total > 0) {
    result.acc = static_cast<double>(result.correct) /
                 static_cast<double>(result.questions);
    result.acc_norm = static_cast<double>(result.correct_norm) /
                      static_cast<double>(result.questions);
  }
  result.acc_stderr = McStderr(result.acc, result.questions);
  result.acc_norm_stderr = McStderr(result.acc_norm, result.questions);
  return result;
}

std::string McResultToJson(const McTaskResult& r) {
  auto stderr_json = [](const std::optional<double>& s) {
    return s ? Json(*s) : Json(nullptr);
  };
  Json j = {{"task", r.name},
            {"file", r.file},
            {"n", r.questions},
            {"correct", r.correct},
            {"acc", r.acc},
            {"acc_stderr", stderr_json(r.acc_stderr)},
            {"correct_norm", r.correct_norm},
            {"acc_norm", r.acc_norm},
            {"acc_norm_stderr", stderr_json(r.acc_norm_stderr)},
            {"num_fewshot", r.num_fewshot},
            {"fewshot_file", r.fewshot_file},
            {"seed", r.seed},
            {"target_delimiter", r.target_delimiter},
            {"fewshot_delimiter", r.fewshot_delimiter},
            {"normalization", "characters"},
            {"sequences", r.sequences},
            {"tokens", r.tokens}};
  return j.dump();
}

}  // namespace hlab::eval
