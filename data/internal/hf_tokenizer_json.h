// Reads a Hugging Face `tokenizers` tokenizer.json into the parts hlab's
// byte-level BPE (data/hf_tokenizer.h) runs on, refusing every feature that
// hlab does not implement rather than tokenizing differently.
//
// Read: model BPE (with ignore_merges; merges as "a b" or ["a", "b"]);
// pre_tokenizer ByteLevel (add_prefix_space false; use_regex adds GPT-2's
// split) or a Sequence of Split steps (Llama 3's or GPT-2's regex,
// behavior Isolated, not inverted) ending in ByteLevel; added_tokens
// (single_word, lstrip and rstrip false); post_processor null, ByteLevel,
// TemplateProcessing or a Sequence of them; decoder ByteLevel.
// Refused (Unimplemented, naming the file and the field): any normalizer,
// another model type, dropout, byte_fallback, a continuing-subword prefix
// or end-of-word suffix, any other pre-tokenizer, Split pattern or decoder,
// truncation, padding, and unknown top-level keys.
//
// Thread-safety: a pure function.
//
//   HLAB_ASSIGN_OR_RETURN(HfTokenizerJson def,
//                         ParseHfTokenizerJson(text, "dir/tokenizer.json"));
//   def.splits;  // {HfSplit::kLlama3} for Llama 3
#ifndef HLAB_DATA_INTERNAL_HF_TOKENIZER_JSON_H_
#define HLAB_DATA_INTERNAL_HF_TOKENIZER_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::data::internal {

// A pre-tokenization regex hlab implements by hand.
enum class HfSplit {
  kLlama3,  // data/internal/llama3_pretokenizer.h
  kGpt2,    // data/internal/gpt2_pretokenizer.h (ByteLevel's use_regex)
};

struct HfAddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  // Matched on normalized text (a second pass in Hugging Face's order;
  // without a normalizer only the order of the passes differs).
  bool normalized = false;
};

struct HfTokenizerJson {
  // Applied in order to the text between added tokens; each step splits
  // the pieces of the one before.
  std::vector<HfSplit> splits;
  // model.vocab: token (byte-level characters) -> id.
  std::vector<std::pair<std::string, int32_t>> vocab;
  // model.merges in rank order: (left, right).
  std::vector<std::pair<std::string, std::string>> merges;
  // model.ignore_merges: a piece that is itself in the vocab is one token.
  bool ignore_merges = false;
  std::vector<HfAddedToken> added_tokens;
  // The post-processor's template for one sequence: the ids it puts before
  // and after the text (Llama 3 from Meta: {<|begin_of_text|>}, {}).
  std::vector<int32_t> template_prefix;
  std::vector<int32_t> template_suffix;
};

// Parses `json_text`, the contents of `path` (named in every error).
// DataLoss when it is not a tokenizer.json (not JSON, a field of the wrong
// type, an id outside [0, 2^24)); Unimplemented for a feature hlab does
// not read (the message names it: `PATH: model.type "Unigram" is not
// supported (hlab reads byte-level BPE)`).
absl::StatusOr<HfTokenizerJson> ParseHfTokenizerJson(
    absl::string_view json_text, const std::string& path);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_HF_TOKENIZER_JSON_H_
