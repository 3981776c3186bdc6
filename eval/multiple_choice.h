// Multiple-choice tasks in lm-evaluation-harness's conventions (its
// `output_type: multiple_choice`): each question's context and choices are
// scored by log-likelihood, and the answer is the choice the model finds
// most likely (docs/evaluation.md, "Multiple-choice tasks").
//
// A task file is JSONL, one question a line (blank lines skipped, other
// fields ignored):
//   {"context": "Question: What is 2 + 2?\nAnswer:",
//    "choices": ["3", "4", "5"], "gold": 1}
// `context` is lm-eval's doc_to_text, `choices` its doc_to_choice and
// `gold` the index doc_to_target gives.
//
// Requests, as lm-eval builds them: the context is the few-shot examples,
// each "context + target_delimiter + gold choice + fewshot_delimiter"
// (" " and "\n\n"), then the question's context; the continuation of
// choice c is target_delimiter + choices[c]. Encoding follows lm-eval's
// HFLM._encode_pair: trailing whitespace of the context moves to the
// continuation, and the continuation's tokens are those of
// Encode(context + continuation) after the first |Encode(context)|. The
// scored sequence is end_of_document, the context's tokens, the
// continuation's (a document starts after the separator, as in training;
// lm-eval adds such a prefix token only to an empty context).
//
// Scores: ll_c = -sum of the NLLs of continuation c's tokens. acc: the
// question is right when argmax_c ll_c is gold; acc_norm: argmax_c ll_c /
// chars_c, where chars_c counts the Unicode characters (code points) of
// choices[c] without the delimiter, as lm-eval's len(choice) does. Ties go
// to the lower index (numpy's argmax). stderr is lm-eval's mean_stderr:
// sqrt(p (1 - p) / (n - 1)), none for n = 1.
//
// Few-shot examples come from `fewshot_file` (the same format): for
// question i (0-based), num_fewshot distinct questions drawn without
// replacement by data::Rng(MixSeeds(seed, i)), in drawing order; when the
// few-shot file is the task file itself, question i is never its own
// example (lm-eval samples n + 1 and drops it). The draws are lm-eval's
// convention, not Python's random.sample stream: a fixed seed gives the
// same examples on every run and machine.
//
// Thread-safety: free functions; ScoreMcTask uses the scorer from the
// calling thread only.
//
//   McTaskConfig config;
//   config.name = "simple_qa";
//   config.file = "examples/eval/simple_qa.jsonl";
//   HLAB_ASSIGN_OR_RETURN(McPreparedTask task,
//                         PrepareMcTask(config, tokenizer,
//                         /*max_tokens=*/256));
//   HLAB_ASSIGN_OR_RETURN(McTaskResult r, ScoreMcTask(scorer, task));
//   std::cout << r.acc << " " << r.acc_norm << McResultToJson(r);
#ifndef HLAB_EVAL_MULTIPLE_CHOICE_H_
#define HLAB_EVAL_MULTIPLE_CHOICE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"
#include "eval/token_scorer_interface.h"
#include "task/eval_task.h"

namespace hlab::eval {

// One question of a task file.
struct McDocument {
  int64_t line = 0;  // 1-based line of its file
  std::string context;
  std::vector<std::string> choices;
  int64_t gold = 0;  // choices[gold] is the answer
};

// The questions of a task file's text, named `path` in errors:
// InvalidArgument "PATH:LINE: ..." for a line that is not a JSON object,
// a context that is not a string, no choices (missing, not an array, or
// empty), a choice that is not a string or is empty, a gold index that is
// not an integer or is outside [0, choices); "PATH: no questions" when
// there are none.
absl::StatusOr<std::vector<McDocument>> ParseMcDocuments(
    absl::string_view text, const std::string& path);

// ParseMcDocuments of a file; NotFound naming it when it cannot be read.
absl::StatusOr<std::vector<McDocument>> ReadMcDocuments(
    const std::string& path);

// The Unicode characters (code points) of UTF-8 text: Python's len(str).
int64_t Utf8Characters(absl::string_view text);

// One task: a file, its few-shot source and the delimiters.
struct McTaskConfig {
  std::string name;  // the metrics' suffix: mc_acc/<name>
  std::string file;
  std::string fewshot_file;  // "" = none (num_fewshot must be 0)
  int64_t num_fewshot = 0;
  uint64_t seed = task::kDefaultMultipleChoiceSeed;  // lm-eval's: 1234
  std::string target_delimiter = " ";
  std::string fewshot_delimiter = "\n\n";
  int64_t limit = 0;  // the first `limit` questions; 0: all
};

// The few-shot examples of question `index`: num_fewshot distinct members
// of `pool` (as above), leaving out pool[exclude] when exclude >= 0.
// Requires num_fewshot <= the pool's size without the excluded one.
std::vector<const McDocument*> McFewshotExamples(
    const std::vector<McDocument>& pool, int64_t num_fewshot, uint64_t seed,
    int64_t index, int64_t exclude);

// The context text of `doc` after `examples` (lm-eval's fewshot_context).
std::string McContext(const McDocument& doc,
                      const std::vector<const McDocument*>& examples,
                      const McTaskConfig& config);

// A question encoded: the scored sequence of choice c is context followed
// by continuations[c].
struct McRequest {
  int64_t line = 0;
  std::vector<int32_t> context;  // end_of_document, the context's tokens
  std::vector<std::vector<int32_t>> continuations;
  std::vector<int64_t> choice_chars;  // Utf8Characters(choices[c])
  int64_t gold = 0;
};

// A task ready to score: every question loaded, checked and encoded.
struct McPreparedTask {
  McTaskConfig config;
  std::vector<McRequest> requests;
  int64_t fewshot_pool = 0;    // questions in the few-shot file
  int64_t longest_tokens = 0;  // the longest context + continuation
};

// Loads `config.file` (and its few-shot file), draws the examples and
// encodes every request. Errors: those of ReadMcDocuments; InvalidArgument
// naming the field for an empty name or file, a negative num_fewshot or
// limit, num_fewshot > 0 without a fewshot_file, or more examples than
// the few-shot file holds; "FILE:LINE: ..." for a choice that encodes to
// no token after its context, and, when max_tokens > 0, for a context +
// continuation of more than max_tokens tokens (the model's context; the
// leading separator not counted: the model reads exactly these tokens).
absl::StatusOr<McPreparedTask> PrepareMcTask(const McTaskConfig& config,
                                             const data::Tokenizer& tokenizer,
                                             int64_t max_tokens);

// One question's scores.
struct McQuestionScore {
  int64_t line = 0;
  std::vector<double> loglikelihood;  // ll_c, nats
  int64_t pred = 0, pred_norm = 0;    // argmax ll_c, argmax ll_c / chars_c
  int64_t gold = 0;
};

struct McTaskResult {
  std::string name, file, fewshot_file;
  int64_t questions = 0, num_fewshot = 0;
  uint64_t seed = 0;
  int64_t correct = 0, correct_norm = 0;
  double acc = 0, acc_norm = 0;
  std::optional<double> acc_stderr, acc_norm_stderr;  // n >= 2
  int64_t sequences = 0;  // choices scored, all questions
  int64_t tokens = 0;     // continuation tokens scored
  std::string target_delimiter, fewshot_delimiter;
  std::vector<McQuestionScore> scores;  // in file order
};

// Called after each batch of questions with (questions done, in all).
using McProgress = std::function<void(int64_t, int64_t)>;

// Scores every request, the choices of several questions per ScoreBatch.
// Internal when the scorer returns the wrong number of NLLs.
absl::StatusOr<McTaskResult> ScoreMcTask(TokenScorer& scorer,
                                         const McPreparedTask& task,
                                         const McProgress& progress = {});

// lm-eval's mean_stderr of a 0/1 metric with mean p over n questions.
std::optional<double> McStderr(double p, int64_t n);

// The details of mc_acc/<name> and mc_acc_norm/<name>: {"task", "file",
// "n", "correct", "acc", "acc_stderr", "correct_norm", "acc_norm",
// "acc_norm_stderr", "num_fewshot", "fewshot_file", "seed",
// "target_delimiter", "fewshot_delimiter", "normalization": "characters",
// "sequences", "tokens"} (a stderr of n = 1 is null). Per-question scores
// are left out.
std::string McResultToJson(const McTaskResult& result);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_MULTIPLE_CHOICE_H_
