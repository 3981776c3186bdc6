// LoadLongPplReference: the model that selects LongPPL's key tokens, as an
// EVAL task names it (task/eval_task.h, LongPplReference): an hlab
// checkpoint, or a Hugging Face Llama directory (hf_dir; the paper selects
// with Llama-3.1-8B).
//
// Key tokens are positions in one tokenization. A reference that tokenizes
// as the evaluated model does (same vocabulary size, and the same tokenizer
// identity where both record one; a Llama's is its directory's
// tokenizer.json, read as hf:DIR) selects on the model's tokens. One that
// does not selects on its own, and the result carries its tokenizer:
// key tokens then travel as character ranges
// (eval/cross_tokenizer_keys.h). A checkpoint's tokenizer is named by
// `reference.tokenizer` (checkpoints record only its identity), a Llama's
// is its tokenizer.json; without one, a mismatch is refused.
//
// The Llama runs on the GPU when LibTorch sees one, else on the CPU.
//
// Thread-safety: free function; the returned scorer is not thread-safe.
//
//   std::vector<std::string> warnings;
//   HLAB_ASSIGN_OR_RETURN(LongPplReferenceModel ref,
//       LoadLongPplReference(spec.reference, config, tokenizer, &warnings));
//   auto keys = SelectKeyTokens(*ref.scorer, corpus, key_config, n);
#ifndef HLAB_EVAL_LONGPPL_REFERENCE_H_
#define HLAB_EVAL_LONGPPL_REFERENCE_H_

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "eval/token_scorer_interface.h"
#include "model/config/model_config.h"
#include "task/eval_task.h"

namespace hlab::eval {

struct LongPplReferenceModel {
  std::unique_ptr<TokenScorer> scorer;
  // The key-token cache's identity of the reference: an hlab checkpoint's
  // payload SHA-256, or a SHA-256 of a Llama's config.json and weights.
  std::string sha256;
  nlohmann::json details;  // recorded beside log_longppl
  // The reference's tokenizer when it is not the evaluated model's; null
  // when they tokenize alike.
  std::unique_ptr<data::Tokenizer> tokenizer;
};

// Errors name the field (evals.longppl.reference.checkpoint or .hf_dir):
// NotFound / DataLoss / InvalidArgument from loading, FailedPrecondition
// when the reference does not tokenize as the evaluated model.
absl::StatusOr<LongPplReferenceModel> LoadLongPplReference(
    const task::LongPplReference& spec, const model::ModelConfig& model,
    const std::string& model_tokenizer, std::vector<std::string>* warnings);

// What hlab-eval --check can say without loading the weights' values: the
// Llama's config and tensors are read and its tokenizer compared, as above.
// Returns {hf_dir, weights, parameters}.
absl::StatusOr<nlohmann::json> CheckLlamaReference(
    const task::LongPplReference& spec, const model::ModelConfig& model,
    const std::string& model_tokenizer, std::vector<std::string>* warnings);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_LONGPPL_REFERENCE_H_
