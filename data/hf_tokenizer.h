// HfTokenizer: a Hugging Face `tokenizers` tokenizer.json of the byte-level
// BPE kind (Llama 3, GPT-2's Hugging Face form), read without the
// `tokenizers` library. Spec `hf:DIR`, DIR holding tokenizer.json (and
// optionally tokenizer_config.json).
//
// Encode() follows Hugging Face's encode(text, add_special_tokens=False):
//   1. added tokens (Llama 3's <|begin_of_text|>, <|eot_id|>, ...) are cut
//      out of the text first, leftmost-longest, so a special token written
//      in text IS the special id;
//   2. the text between them is pre-tokenized with the file's Split regex
//      (Llama 3's, data/internal/llama3_pretokenizer.h) and/or ByteLevel's
//      (GPT-2's, data/internal/gpt2_pretokenizer.h), both hand-written;
//   3. each piece is byte-level BPE-encoded (data/internal/bpe_merger.h);
//      with model.ignore_merges (Llama 3) a piece that is itself in the
//      vocabulary is that one token.
// Like hlab's other tokenizers, Encode() adds no BOS or EOS: the
// post-processor's template (Meta's Llama 3 file: <|begin_of_text|> before
// the text) is not applied; template_prefix() / template_suffix() give its
// ids. Data preparation needs none (the mixture separates documents with
// end_of_document). Every byte string round-trips through Encode/Decode,
// except text holding an added token's string: that decodes as the token
// (end_of_document as "\n", per Tokenizer::Decode).
//
// What the file may use, and what is refused with an error naming the file
// and the feature: data/internal/hf_tokenizer_json.h and docs/data.md.
//
// end_of_document is tokenizer_config.json's eos_token when DIR has one,
// otherwise the file's only special added token; pad is its pad_token, or
// end_of_document.
//
// Thread-safety: immutable after Load(); safe for concurrent const calls.
// Encode() keeps a bounded per-thread cache of encoded pieces.
//
//   HLAB_ASSIGN_OR_RETURN(auto tok, HfTokenizer::Load("/data/llama3"));
//   tok->Encode("Hello world");  // {9906, 1917}
//   tok->template_prefix();      // {} (this file's post-processor: ByteLevel)
#ifndef HLAB_DATA_HF_TOKENIZER_H_
#define HLAB_DATA_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/internal/bpe_merger.h"
#include "data/internal/hf_tokenizer_json.h"
#include "data/tokenizer.h"

namespace hlab::data {

class HfTokenizer final : public Tokenizer {
 public:
  // Loads DIR/tokenizer.json (and DIR/tokenizer_config.json if present).
  // NotFound naming a missing file; DataLoss naming a file that does not
  // parse (or whose vocabulary lacks a byte's symbol or a merge's tokens);
  // Unimplemented naming a feature hlab does not read; FailedPrecondition
  // when the end-of-document token cannot be told.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(
      const std::string& dir);

  std::vector<int32_t> Encode(absl::string_view text) const override;
  EncodedText EncodeWithOffsets(absl::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  std::string spec() const override { return "hf:" + dir_; }

  // The ids the file's post-processor puts before and after a sequence
  // (Hugging Face's add_special_tokens=True); Encode() leaves them out.
  const std::vector<int32_t>& template_prefix() const {
    return template_prefix_;
  }
  const std::vector<int32_t>& template_suffix() const {
    return template_suffix_;
  }

 private:
  // A pass of added-token matching: tokens by first byte, longest first.
  struct AddedTokenPass {
    std::vector<std::pair<std::string, int32_t>> by_first_byte[256];
    bool empty = true;
  };
  // A run of text, or an added token (id >= 0).
  struct Segment {
    absl::string_view text;
    int32_t id;
  };

  HfTokenizer() = default;
  absl::Status Build(const internal::HfTokenizerJson& def,
                     const std::string& json_path);
  // Splits the text segments of `in` around the tokens of `pass`.
  static void SplitAddedTokens(const AddedTokenPass& pass,
                               const std::vector<Segment>& in,
                               std::vector<Segment>* out);
  // Appends the pre-tokenized pieces of `text`.
  void PreTokenize(absl::string_view text,
                   std::vector<absl::string_view>* pieces) const;
  // Appends the ids of one piece (BPE, or one token under ignore_merges).
  void EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const;
  // Appends the ids of `text` to `ids` and, when `spans` is not null, their
  // byte spans.
  void EncodeTo(absl::string_view text, std::vector<int32_t>* ids,
                std::vector<ByteSpan>* spans) const;

  std::string dir_;
  uint64_t instance_id_ = 0;  // keys the per-thread piece cache
  Vocabulary vocabulary_;
  std::vector<internal::HfSplit> splits_;
  bool ignore_merges_ = false;
  // model.vocab by the raw bytes its tokens stand for.
  absl::flat_hash_map<std::string, int32_t> vocab_;
  internal::BpeMerger merger_;
  AddedTokenPass added_passes_[2];    // not normalized, then normalized
  std::vector<std::string> decoded_;  // id -> bytes
  std::vector<bool> has_id_;          // id -> a token has it
  std::vector<int32_t> template_prefix_;
  std::vector<int32_t> template_suffix_;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_HF_TOKENIZER_H_
