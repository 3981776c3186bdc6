// Tokenizer: turns text into token ids and back, the one interface the
// import (data/import.h), the inspect command and evaluation read text
// through. Implementations: byte-level (data/byte_tokenizer.h), SentencePiece
// (data/sentencepiece_tokenizer.h), GPT-2 byte-level BPE
// (data/gpt2_tokenizer.h) and Hugging Face tokenizer.json byte-level BPE
// (data/hf_tokenizer.h). MakeTokenizer() builds one from a spec string.
//
// Specs:
//   "byte"                          258 ids: bytes, end of document, pad
//   "sentencepiece:PATH.model"      a trained SentencePiece model
//   "gpt2:DIR"                      DIR/encoder.json + DIR/vocab.bpe
//   "hf:DIR"                        DIR/tokenizer.json (Llama 3's, ...)
//
// A tokenizer is identified by vocabulary().tokenizer, which names the kind
// and, for model files, a SHA-256 prefix of their contents
// ("sentencepiece:3f2a9c01d4e5b6a7"): two datasets or models share a
// tokenizer exactly when these strings are equal, wherever the files live.
//
// Thread-safety: implementations are immutable after construction and safe
// for concurrent const calls.
//
//   HLAB_ASSIGN_OR_RETURN(auto tok, MakeTokenizer("byte"));
//   std::vector<int32_t> ids = tok->Encode("héllo");
//   std::string text = tok->Decode(ids);  // "héllo"
//   EncodedText enc = tok->EncodeWithOffsets("héllo");
//   enc.spans[1];                         // {1, 2}: the first byte of "é"
#ifndef HLAB_DATA_TOKENIZER_H_
#define HLAB_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/corpus.h"

namespace hlab::data {

// Bytes [begin, end) of a text.
struct ByteSpan {
  int64_t begin = 0;
  int64_t end = 0;

  friend bool operator==(const ByteSpan& a, const ByteSpan& b) {
    return a.begin == b.begin && a.end == b.end;
  }
  friend bool operator!=(const ByteSpan& a, const ByteSpan& b) {
    return !(a == b);
  }
};

// Token ids with the bytes of the encoded text each one stands for.
struct EncodedText {
  std::vector<int32_t> ids;
  std::vector<ByteSpan> spans;  // spans[i] is ids[i]'s; as many as ids
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text` (no end-of-document separator appended). Never
  // fails: every byte string has an encoding (invalid UTF-8 included for
  // byte-level tokenizers; SentencePiece maps unknown characters to unk).
  virtual std::vector<int32_t> Encode(absl::string_view text) const = 0;

  // Encode(text) with each token's byte span in `text` (Hugging Face's
  // offset_mapping, in bytes). The spans tile the text: the first begins at
  // 0, each begins where the one before ends, the last ends at text.size()
  // (none when the text is empty). A span may be empty: a SentencePiece
  // "\u2581" that stands for no input byte (the dummy prefix). For byte and
  // byte-level BPE tokenizers every span holds the token's own bytes, so
  // Decode({id}) is the span's text (but for end_of_document and pad, which
  // decode as "\n" and nothing); a token cut inside a UTF-8 character has a
  // span cut there too. For SentencePiece each byte-fallback piece spans its
  // one byte, and bytes the model's normalizer drops belong to the token
  // after them (the last token, at the end of the text).
  virtual EncodedText EncodeWithOffsets(absl::string_view text) const = 0;

  // The text of `ids`. The pad id decodes to nothing, end_of_document to
  // "\n"; ids outside [0, vocabulary().size) decode to U+FFFD.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;

  // Size and special ids; `tokenizer` is the identity described above.
  virtual const Vocabulary& vocabulary() const = 0;

  // The spec this tokenizer was made from (MakeTokenizer(spec()) loads it
  // again while its files stay where they are).
  virtual std::string spec() const = 0;
};

// Builds a tokenizer from `spec` (see the top of this file). Relative paths
// in a spec are resolved against `base_dir` when it is non-empty (a prepared
// dataset stores "sentencepiece:tokenizer.model" next to its manifest).
// Errors: InvalidArgument for an unknown spec; NotFound or DataLoss (naming
// the file) when a model file is missing or cannot be parsed; for hf:,
// Unimplemented naming a tokenizer.json feature hlab does not read.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    absl::string_view spec, absl::string_view base_dir = "");

// The byte-level tokenizer (spec "byte"); never fails.
std::unique_ptr<Tokenizer> MakeByteTokenizer();

// Its vocabulary (data/byte_tokenizer.h): {258 ids, end_of_document 256,
// pad 257, tokenizer "byte"}.
Vocabulary ByteVocabulary();

}  // namespace hlab::data

#endif  // HLAB_DATA_TOKENIZER_H_
