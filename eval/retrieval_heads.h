// Retrieval-head tracing (appendix D.4 of the study): which full-attention
// heads copy a needle's value into the answer, after Wu et al.'s
// Retrieval_Head score.
//
// Data: synthetic-haystack single-needle NIAH samples (eval/niah.h, the
// synthetic corpus's binding sentences, as for probing), sample i at depth
// depths[i % depths]. Each sample is run once, teacher-forced on
// prompt + true answer, with every full-attention layer's probabilities
// captured (O(H T^2) floats per layer: one sequence at a time).
//
// Per sample, the copied tokens are the answer's tokens; answer token j is
// predicted at query position q = |prompt| - 1 + j, where the model's
// generated token is g = argmax of its logits (greedy under teacher
// forcing). For every full-attention head (every head of a full layer,
// the full heads of a head-wise SWA layer), at each q:
//   * hit: the head's top-1 attended key position p (ties: the first) lies
//     in the queried needle's token span and g is the needle's value, the
//     true answer token (RetrievalMatch::kNeedleValue: the synthetic
//     corpus's needle is one binding token that encodes key and value, so
//     Wu et al.'s rule, g equal to the token at p, could never hold);
//     retrieval score = hits / copied tokens, over all samples;
//   * needle mass: the attention mass on the needle span (the sink's share
//     counts as mass elsewhere), averaged over the copied tokens;
//   * entropy: the Shannon entropy of the head's distribution over the keys
//     (renormalised without the sink), divided by log(q + 1), the entropy of
//     the uniform distribution over the visible keys; 0 at q = 0.
// The top heads are the `top_heads` best by retrieval score, then needle
// mass, then (layer, head) order. answer_accuracy is the fraction of copied
// tokens where g is the true token.
//
// Thread-safety: free functions; TraceRetrievalHeads uses the model from the
// calling thread (and changes its attention capture for the call).
//
//   RetrievalHeadsConfig config;
//   config.context_length = 256;
//   HLAB_ASSIGN_OR_RETURN(RetrievalHeadsResult r,
//                         TraceRetrievalHeads(model, *tokenizer, config));
//   // r.heads[r.top[0]].score
#ifndef HLAB_EVAL_RETRIEVAL_HEADS_H_
#define HLAB_EVAL_RETRIEVAL_HEADS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {

// One head's running sums over the copied tokens.
struct HeadTally {
  int64_t layer = 0, head = 0;
  int64_t copied = 0;  // copied tokens seen
  int64_t hits = 0;
  double needle_mass = 0;  // sums over the copied tokens
  double entropy = 0;
};

// One sequence's attention and what it copies.
struct CopyEvent {
  int64_t query = 0;      // the query position
  int32_t generated = 0;  // the model's token there
  int32_t target = 0;     // the true answer token there
};

// What counts as retrieving the needle, given that the head's top-1 key p
// lies in the needle:
//   kCopiedToken  the generated token equals the token at p (Wu et al.'s
//                 copy-paste rule, for needles that hold the answer's
//                 tokens literally);
//   kNeedleValue  the generated token is the true answer (for the synthetic
//                 corpus's needles, whose value is carried by one binding
//                 token: the answer "7" never appears in the needle, so no
//                 head could copy it).
enum class RetrievalMatch { kCopiedToken, kNeedleValue };

// Adds one sequence to `tallies` (one per head of the layer, in head order,
// created when empty). probabilities: (H, T, T) of one layer for one
// sequence; sequence: its T tokens; the needle spans [needle_begin,
// needle_end). InvalidArgument for mismatched shapes, a query outside
// [0, T) or an empty or out-of-range needle.
absl::Status TallyRetrieval(
    const torch::Tensor& probabilities, const std::vector<int32_t>& sequence,
    int64_t needle_begin, int64_t needle_end,
    const std::vector<CopyEvent>& copies, int64_t layer,
    std::vector<HeadTally>* tallies,
    RetrievalMatch match = RetrievalMatch::kCopiedToken);

struct RetrievalHead {
  int64_t layer = 0, head = 0;
  double score = 0;        // hits / copied
  double needle_mass = 0;  // mean over the copied tokens
  double entropy = 0;      // mean normalised entropy
  int64_t hits = 0, copied = 0;
};

// The tallies as heads, and the indices of the `top` best (see above).
std::vector<RetrievalHead> SummariseRetrieval(
    const std::vector<HeadTally>& tallies);
std::vector<int> TopRetrievalHeads(const std::vector<RetrievalHead>& heads,
                                   int top);

struct RetrievalHeadsConfig {
  int64_t context_length = 0;  // tokens of prompt + answer; required
  std::vector<double> depths = {0.1, 0.3, 0.5, 0.7, 0.9};
  int64_t samples = 64;
  int top_heads = 2;
  uint64_t seed = 0;
  uint64_t corpus_seed = 0;  // the haystack's lexicon (the run's data.seed)
};

struct RetrievalHeadsResult {
  std::vector<RetrievalHead> heads;  // full-attention heads, layer order
  std::vector<int> top;              // indices into heads, best first
  int64_t samples = 0;
  int64_t copied = 0;           // copied tokens in all
  double answer_accuracy = 0;   // generated == true token
  std::vector<int64_t> layers;  // the full-attention layers traced
};

// Called after each sample with (samples done, samples in all).
using RetrievalProgress = std::function<void(int64_t, int64_t)>;

// Generates the samples and traces every full-attention head.
// InvalidArgument naming the field ("context_length: ...", "depths[1]",
// "samples", "top_heads") for bad input, including a context length that
// cannot hold the needle, question and answer; FailedPrecondition when the
// model has no full-attention layer.
absl::StatusOr<RetrievalHeadsResult> TraceRetrievalHeads(
    model::HybridLM& model, const data::Tokenizer& tokenizer,
    const RetrievalHeadsConfig& config, const RetrievalProgress& progress = {});

}  // namespace hlab::eval

#endif  // HLAB_EVAL_RETRIEVAL_HEADS_H_
