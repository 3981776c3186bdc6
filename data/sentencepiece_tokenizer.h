// SentencePieceTokenizer: a Tokenizer over a SentencePiece model (Debian's
// libsentencepiece), loaded from a .model file or trained here from text.
//
// end_of_document is the model's eos id and pad its pad id (models trained
// here have pad 0, unk 1, bos 2, eos 3). A model without a pad piece pads
// with eos; a model without eos is refused. Models trained here are lossless:
// identity normalization, whitespace kept, unknown characters as byte pieces,
// so Decode(Encode(text)) == text for any UTF-8 text.
//
// Thread-safety: immutable after construction; safe for concurrent const
// calls. Training is thread-compatible.
//
//   SentencePieceTrainOptions options;
//   options.vocab_size = 4000;
//   HLAB_RETURN_IF_ERROR(TrainSentencePiece(texts, options, path));
//   HLAB_ASSIGN_OR_RETURN(auto tok, SentencePieceTokenizer::Load(path));
#ifndef HLAB_DATA_SENTENCEPIECE_TOKENIZER_H_
#define HLAB_DATA_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"

namespace hlab::data {

namespace internal {
class SentencePieceBackend;
}  // namespace internal

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads `path`. NotFound naming it if it is missing; DataLoss naming it if
  // it is not a SentencePiece model; InvalidArgument if it has no eos piece.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> Encode(absl::string_view text) const override;
  EncodedText EncodeWithOffsets(absl::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  std::string spec() const override { return "sentencepiece:" + path_; }

 private:
  SentencePieceTokenizer(std::unique_ptr<internal::SentencePieceBackend> sp,
                         std::string path, Vocabulary vocabulary);
  std::unique_ptr<internal::SentencePieceBackend> sp_;
  std::string path_;
  Vocabulary vocabulary_;
};

struct SentencePieceTrainOptions {
  // Pieces, specials and the 256 byte pieces included: an upper bound, as a
  // small text may not support that many (the model then has fewer).
  int vocab_size = 8000;
  std::string model_type = "bpe";  // "bpe" or "unigram"
};

// Trains a model on `texts` (documents; each is split into lines, and lines
// over 4192 bytes are skipped by the trainer) and writes it to `model_path`
// atomically (a temporary file renamed into place). InvalidArgument for a bad
// model type, a vocab_size under 300, or no text; Internal when the trainer
// fails (its message is included) or the file cannot be written.
absl::Status TrainSentencePiece(const std::vector<std::string>& texts,
                                const SentencePieceTrainOptions& options,
                                const std::string& model_path);

}  // namespace hlab::data

#endif  // HLAB_DATA_SENTENCEPIECE_TOKENIZER_H_
