// The RULER suite's evaluation (eval/ruler/ruler_tasks.h generates the
// samples): each sample's prompt is decoded greedily for the task's
// tokens_to_generate tokens (TokenScorer::Generate), the tokens are decoded
// to text, control characters become newlines and the text is trimmed, as
// RULER's postprocessing, and scored by RULER's string match:
//   all   string_match_all: the fraction of the references found in the
//         prediction (case-insensitive substrings); NIAH, vt, cwe, fwe
//   part  string_match_part: 1 when any reference is found; QA
// A cell (task, length) is the mean over its samples, in [0, 1] (RULER
// prints x100); a task's score is the mean over lengths, the suite's the
// mean over tasks.
//
// Thread-safety: EvaluateRuler uses the scorer from the calling thread only.
//
//   RulerConfig config;
//   config.lengths = {1024, 2048};
//   HLAB_RETURN_IF_ERROR(ValidateRulerConfig(config));
//   HLAB_ASSIGN_OR_RETURN(RulerResult r,
//       EvaluateRuler(scorer, tokenizer, config, sources));
//   std::cout << RulerResultToJson(r);
#ifndef HLAB_EVAL_RULER_RULER_H_
#define HLAB_EVAL_RULER_RULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "eval/ruler/ruler_tasks.h"
#include "eval/token_scorer_interface.h"

namespace hlab::eval::ruler {

struct RulerConfig {
  // RULER task names; empty: every task whose sources are given (without an
  // essay: niah_single_1, niah_multikey_2, niah_multikey_3, vt, cwe, fwe).
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;  // in tokens, generated ones included
  int64_t samples = 20;          // per task and length (RULER: 500)
  uint64_t seed = 0;
  int64_t tokens_to_generate = 0;  // 0: each task's (RULER's)
};

// InvalidArgument naming the field: an unknown task or a repeated one, no
// length, a length below 2, fewer than one sample, a negative
// tokens_to_generate.
absl::Status ValidateRulerConfig(const RulerConfig& config);

// The tasks `config` runs with `sources`: the named ones (InvalidArgument,
// naming the task and what it needs, when a source is missing), or every
// task whose sources are given; `skipped` gets "task: needs X" for the
// others.
absl::StatusOr<std::vector<RulerTaskInfo>> ResolveRulerTasks(
    const RulerConfig& config, const RulerSources& sources,
    std::vector<std::string>* skipped);

// RULER's metrics on one prediction.
double StringMatchAll(const std::string& prediction,
                      const std::vector<std::string>& references);
double StringMatchPart(const std::string& prediction,
                       const std::vector<std::string>& references);
// RULER's postprocessing: control characters to '\n', then trimmed.
std::string PostprocessPrediction(const std::string& text);

struct RulerCell {
  std::string task;
  int64_t length = 0;
  int64_t samples = 0;
  double score = 0;  // mean over samples, in [0, 1]
  // The first sample's prediction and references, for reading.
  std::string example_prediction;
  std::vector<std::string> example_answers;
};

struct RulerResult {
  std::vector<RulerCell> cells;         // task-major, lengths in order
  std::map<std::string, double> tasks;  // mean over lengths
  double score = 0;                     // mean over tasks
  std::vector<std::string> skipped;     // "task: needs X", "task at L: ..."
  int64_t generated_tokens = 0;
  double seconds = 0;
};

// (samples done, samples in all), after each sample.
using RulerProgress = std::function<void(int64_t done, int64_t total)>;

// Generates every sample first (so a length that cannot hold a named task
// fails before any decoding; a task chosen by default skips that length,
// in `skipped`), then decodes and scores them. Task scores are means over
// the lengths that ran.
absl::StatusOr<RulerResult> EvaluateRuler(TokenScorer& scorer,
                                          const data::Tokenizer& tokenizer,
                                          const RulerConfig& config,
                                          const RulerSources& sources,
                                          const RulerProgress& progress = {});

// {"score", "tasks": {name: score}, "cells": [{task, length, samples,
// score, example_prediction, example_answers}], "skipped", ...}.
std::string RulerResultToJson(const RulerResult& result);

}  // namespace hlab::eval::ruler

#endif  // HLAB_EVAL_RULER_RULER_H_
