// TokenScorer: the interface the evaluations read a language model through:
// per-token negative log-likelihoods of token sequences and, for greedy
// decoding, the most likely next token. LibTorch-free, so evaluation code
// that only scores (eval/niah.h) and its tests need no LibTorch headers;
// eval/token_scorer.h implements it for a HybridLM (ModelScorer).
//
// Thread-safety: implementations decide; ModelScorer is not thread-safe.
//
//   std::vector<float> nll = scorer.Score(tokens);  // nll[i - 1]: token i
//   auto all = scorer.ScoreBatch({a, b, c});        // one forward if it can
//   absl::StatusOr<int32_t> next = scorer.NextToken(prefix);
//   GenerateOptions options;
//   options.max_new_tokens = 32;
//   auto out = scorer.Generate(prompt, options);  // greedy
#ifndef HLAB_EVAL_TOKEN_SCORER_INTERFACE_H_
#define HLAB_EVAL_TOKEN_SCORER_INTERFACE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hlab::eval {

// Greedy decoding's limits.
struct GenerateOptions {
  int64_t max_new_tokens = 32;       // >= 1
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one
};

class TokenScorer {
 public:
  virtual ~TokenScorer() = default;

  // For tokens t_0 .. t_{n-1} (n >= 2), returns n - 1 values: element i - 1
  // is -log p(t_i | t_0 .. t_{i-1}) in nats.
  virtual std::vector<float> Score(const std::vector<int32_t>& tokens) = 0;

  // Score() of each sequence, in order. The default calls Score() once per
  // sequence; ModelScorer runs sequences of equal length as one batch.
  virtual std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) {
    std::vector<std::vector<float>> out;
    out.reserve(sequences.size());
    for (const std::vector<int32_t>& s : sequences) out.push_back(Score(s));
    return out;
  }

  // The most likely next token after `prefix` (non-empty): the argmax of
  // p(. | prefix), the lowest id on ties. Unimplemented for scorers that
  // cannot decode (the default).
  virtual absl::StatusOr<int32_t> NextToken(
      const std::vector<int32_t>& prefix) {
    (void)prefix;
    return absl::UnimplementedError(
        "this scorer cannot decode (no next-token argmax)");
  }

  // Greedy decoding: up to max_new_tokens tokens after `prompt` (non-empty),
  // each the NextToken of the prompt and the tokens before it; it ends
  // early after a stop token, which is included. The default re-runs the
  // whole prefix for every token; scorers with a cache (ModelScorer) must
  // return the same tokens.
  virtual absl::StatusOr<std::vector<int32_t>> Generate(
      const std::vector<int32_t>& prompt, const GenerateOptions& options) {
    if (prompt.empty()) {
      return absl::InvalidArgumentError("Generate: the prompt is empty");
    }
    if (options.max_new_tokens < 1) {
      return absl::InvalidArgumentError(
          "Generate: max_new_tokens must be at least 1");
    }
    std::vector<int32_t> prefix = prompt;
    std::vector<int32_t> out;
    while (static_cast<int64_t>(out.size()) < options.max_new_tokens) {
      absl::StatusOr<int32_t> next = NextToken(prefix);
      if (!next.ok()) return next.status();
      out.push_back(*next);
      prefix.push_back(*next);
      bool stop = false;
      for (int32_t s : options.stop_tokens) stop = stop || s == *next;
      if (stop) break;
    }
    return out;
  }
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_TOKEN_SCORER_INTERFACE_H_
