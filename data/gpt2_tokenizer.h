// Gpt2Tokenizer: GPT-2's byte-level BPE (50257 ids) from the original
// encoder.json (token -> id) and vocab.bpe (merges, in rank order), with
// GPT-2's pre-tokenization hand-written (data/internal/gpt2_pretokenizer.h;
// exact for ASCII, Unicode classes approximated).
//
// end_of_document is <|endoftext|> (50256). GPT-2 has no pad token, so pad
// is 50256 too. "<|endoftext|>" inside text is encoded as plain text, never
// as the special id.
//
// Thread-safety: immutable after Load(); safe for concurrent const calls.
// Encode() keeps a bounded per-thread cache of encoded pieces.
//
//   HLAB_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::Load("/data/gpt2"));
//   tok->Encode("Hello world");  // {15496, 995}
#ifndef HLAB_DATA_GPT2_TOKENIZER_H_
#define HLAB_DATA_GPT2_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"

namespace hlab::data {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // Loads DIR/encoder.json and DIR/vocab.bpe. NotFound naming a missing
  // file; DataLoss naming a file that does not parse (or an encoder without
  // <|endoftext|>, or a merge whose result is not in the encoder).
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Load(
      const std::string& dir);

  std::vector<int32_t> Encode(absl::string_view text) const override;
  EncodedText EncodeWithOffsets(absl::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  std::string spec() const override { return "gpt2:" + dir_; }

 private:
  Gpt2Tokenizer() = default;
  // Appends the ids of one pre-tokenized piece.
  void EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const;
  // Appends the ids of `text` to `ids` and, when `spans` is not null, their
  // byte spans.
  void EncodeTo(absl::string_view text, std::vector<int32_t>* ids,
                std::vector<ByteSpan>* spans) const;

  std::string dir_;
  uint64_t instance_id_ = 0;  // keys the per-thread piece cache
  Vocabulary vocabulary_;
  std::unordered_map<std::string, int32_t> encoder_;  // mapped text -> id
  std::vector<std::string> decoder_;                  // id -> raw bytes
  std::unordered_map<std::string, int> merge_ranks_;  // "a b" -> rank
  std::string byte_to_unicode_[256];                  // UTF-8 of each byte
};

}  // namespace hlab::data

#endif  // HLAB_DATA_GPT2_TOKENIZER_H_
