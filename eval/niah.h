// Needle-in-a-haystack (NIAH): RULER-style generators and likelihood scoring
// (reference notes, section 3.1), for the benchmark and as the input of the
// mechanism analyses (a sample's candidates are the classes of a layer-wise
// probe).
//
// Kinds, in the text format (haystack "noise"):
//   single      one needle "key QZXW is 4821. "; question "recall QZXW is ";
//               answer "4821"
//   multikey    four needles with distinct keys; the question asks one, the
//               other three are distractors (their values are candidates)
//   multivalue  four needles "key QZXW is <v>. " with one key; the answer is
//               the list of all four values in text order, "4821, 0375,
//               9112, 6640"; each candidate is a whole list, so a sample is
//               right only when every value is retrieved
//   passkey     the classic "The pass key is 72813. Remember it. 72813 is
//               the pass key. " in the repeated noise text, after the
//               classic instruction; question "What is the pass key? The
//               pass key is "; answer "72813"
// With haystack "synthetic" the needles are the synthetic corpus's own
// (data/synthetic_corpus.h), so a model trained on it can retrieve: single
// is one binding token "<C7>. " and the question the recall's key letter
// "C", answer "7"; multikey has four bindings with distinct keys;
// multivalue is refused (the corpus never binds a key twice), and at most
// 10 candidates (the corpus's values).
// The haystack is RULER's noise ("The grass is green. The sky is blue. ...")
// repeated, or (`haystack = "synthetic"`, not for passkey) the synthetic
// corpus's filler sentences of a given corpus seed. Neither contains digits,
// binding tokens or upper-case keys, so the answer is never in the
// haystack.
//
// Lengths are exact, in tokens of the given tokenizer: prompt tokens plus the
// true answer's tokens equal `length` (the sequence the model scores, as
// RULER's max_seq_length counts the answer). Prompt and candidate are
// encoded separately and concatenated. The haystack has H = length - (fixed
// parts) tokens. The queried needle (multikey: the asked key's; multivalue:
// one of the four, whose value is the one of its rank in the text) is
// inserted after round(depth * H) haystack tokens, the other needles at
// uniform positions. Each haystack segment between needles is the tail of
// whole sentences, tokenized one by one, so every needle and the question
// follow a full stop, as in the training corpus. Sample i is a pure function
// of (seed, kind, length, depth, i, candidates, haystack).
//
// Scoring: each sample has `candidates` answers (the true one and distinct
// distractors, at a uniformly drawn index); the scorer scores prompt +
// candidate for each, and the sample is right when the true one has the
// lowest summed NLL over the candidate's tokens (ties go to the lower
// index). With `greedy`, the answer's length in tokens is also decoded
// greedily (TokenScorer::Generate) and must match exactly.
//
// Thread-safety: free functions; EvaluateNiah uses the scorer from the
// calling thread only.
//
//   auto tok = data::MakeByteTokenizer();
//   NiahConfig config;
//   config.context_lengths = {256, 512};
//   HLAB_RETURN_IF_ERROR(ValidateNiahConfig(config));
//   HLAB_ASSIGN_OR_RETURN(NiahResult r, EvaluateNiah(scorer, *tok, config));
//   std::cout << NiahResultToJson(r);
#ifndef HLAB_EVAL_NIAH_H_
#define HLAB_EVAL_NIAH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "eval/token_scorer_interface.h"

namespace hlab::eval {

// The four kinds, in their canonical order.
std::vector<std::string> NiahKinds();

// Where the haystack comes from.
struct NiahHaystack {
  std::string source = "noise";  // "noise" | "synthetic"
  // "synthetic": the corpus seed whose lexicon the filler uses (a model's
  // training data.seed, so the filler is in its language).
  uint64_t corpus_seed = 0;
};

// The kinds a haystack supports: all four with "noise"; with "synthetic"
// all but multivalue (the corpus never binds one key to several values).
std::vector<std::string> NiahKindsFor(const NiahHaystack& haystack);

struct NiahConfig {
  std::vector<std::string> kinds = NiahKinds();
  std::vector<int64_t> context_lengths;  // tokens; required
  std::vector<double> depths = {0.1, 0.5, 0.9};
  int64_t samples = 20;  // per (kind, length, depth)
  int candidates = 8;    // 2 .. 100
  uint64_t seed = 0;
  bool greedy = false;
  NiahHaystack haystack;
};

// InvalidArgument naming the field ("depths[1]: must be in [0, 1], got 2").
absl::Status ValidateNiahConfig(const NiahConfig& config);

struct NiahSample {
  std::string kind;
  int64_t length = 0;
  double depth = 0;
  int64_t index = 0;
  std::vector<int32_t> prompt;  // everything before the answer
  std::vector<std::string> candidates;
  std::vector<std::vector<int32_t>> candidate_tokens;
  int answer_index = 0;  // candidates[answer_index] is the true answer
  // Token offsets in `prompt` of each needle and their lengths, in text
  // order; needle_positions[queried_needle] is the needle at `depth`.
  std::vector<int64_t> needle_positions;
  std::vector<int64_t> needle_lengths;
  int queried_needle = 0;
  int64_t haystack_start = 0;   // prompt offset where the haystack begins
  int64_t haystack_tokens = 0;  // H: noise tokens in the prompt
  // Haystack tokens before the queried needle: round(depth * H).
  int64_t haystack_before = 0;
};

// One sample. InvalidArgument naming the field for an unknown kind
// ("kind"), a depth outside [0, 1] ("depth"), candidates outside [2, 100]
// ("candidates"), a bad haystack ("haystack.source") or a length too short
// to hold the needles, question and answer ("context_lengths: 30 tokens
// cannot hold ... (needs at least 58)").
absl::StatusOr<NiahSample> GenerateNiahSample(
    const data::Tokenizer& tokenizer, const std::string& kind, int64_t length,
    double depth, uint64_t seed, int64_t index, int candidates,
    const NiahHaystack& haystack = NiahHaystack());

// A GenerateNiahSample error said of one sample length, for callers whose
// field is `context_length`: "context_lengths: ..." becomes
// "context_length: ..."; other errors are returned unchanged.
absl::Status ForOneContextLength(const absl::Status& status);

// Prompt + candidate c, the sequence the scorer sees.
std::vector<int32_t> NiahSequence(const NiahSample& sample, int c);

struct NiahCell {
  std::string kind;
  int64_t context_length = 0;
  double depth = 0;
  int64_t samples = 0, correct = 0;
  double accuracy = 0;  // correct / samples
  // Greedy exact match (only when NiahConfig::greedy).
  int64_t greedy_correct = 0;
  double greedy_accuracy = 0;
};

struct NiahResult {
  std::vector<NiahCell> cells;  // kinds x lengths x depths, config order
  double accuracy = 0;          // over all samples
  std::map<std::string, double> accuracy_by_kind;
  int64_t samples = 0;
  bool greedy = false;
  double greedy_accuracy = 0;  // when greedy
  int candidates = 0;          // chance = 1 / candidates
};

// Called after each cell with (cells done, cells in all).
using NiahProgress = std::function<void(int64_t, int64_t)>;

// Generates and scores every (kind, length, depth, sample). Errors: those of
// ValidateNiahConfig and GenerateNiahSample; Unimplemented when `greedy` and
// the scorer cannot decode; Internal when the scorer returns the wrong
// number of NLLs.
absl::StatusOr<NiahResult> EvaluateNiah(TokenScorer& scorer,
                                        const data::Tokenizer& tokenizer,
                                        const NiahConfig& config,
                                        const NiahProgress& progress = {});

// {"samples", "candidates", "accuracy", "accuracy_by_kind", "greedy",
//  ["greedy_accuracy",] "cells": [{"kind", "context_length", "depth",
//  "samples", "correct", "accuracy", ["greedy_correct", "greedy_accuracy"]}]}
std::string NiahResultToJson(const NiahResult& result);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_NIAH_H_
