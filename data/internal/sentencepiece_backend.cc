// No abseil header may be included here (see sentencepiece_backend.h).
#include "data/internal/sentencepiece_backend.h"
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/sentencepiece_support.h"

namespace hlab::data::internal {
namespace {

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& sentences)
      : sentences_(sentences) {}
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return sentences_[index_]; }
  sentencepiece::util::Status status() const override {
    return sentencepiece::util::Status();
  }

 private:
  const std::vector<std::string>& sentences_;
  size_t index_ = 0;
};

}  // namespace

class LibraryBackend final : public SentencePieceBackend {
 public:
  std::vector<int> Encode(const std::string& text) const override {
    return processor_.EncodeAsIds(text);
  }
  std::vector<int> EncodeWithOffsets(const std::string& text,
                                     std::vector<int>* begins,
                                     std::vector<int>* ends) const override {
    sentencepiece::ImmutableSentencePieceText spt =
        processor_.EncodeAsImmutableProto(text);
    std::vector<int> ids;
    ids.reserve(spt.pieces_size());
    for (size_t i = 0; i < spt.pieces_size(); ++i) {
      const auto piece = spt.pieces(static_cast<int>(i));
      ids.push_back(static_cast<int>(piece.id()));
      begins->push_back(static_cast<int>(piece.begin()));
      ends->push_back(static_cast<int>(piece.end()));
    }
    return ids;
  }
  bool IsByte(int id) const override { return processor_.IsByte(id); }
  std::string Decode(const std::vector<int>& ids) const override {
    return processor_.DecodeIds(ids);
  }
  int piece_size() const override { return processor_.GetPieceSize(); }
  int eos_id() const override { return processor_.eos_id(); }
  int pad_id() const override { return processor_.pad_id(); }

  sentencepiece::SentencePieceProcessor processor_;
};

std::unique_ptr<SentencePieceBackend> LoadFromLibrary(
    const std::string& serialized, std::string* error) {
  auto backend = std::make_unique<LibraryBackend>();
  sentencepiece::util::Status status =
      backend->processor_.LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return backend;
}

std::string TrainWithLibrary(const std::vector<std::string>& sentences,
                             int vocab_size, const std::string& model_type,
                             std::string* error) {
  std::unordered_map<std::string, std::string> args = {
      {"model_type", model_type},
      {"vocab_size", std::to_string(vocab_size)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"num_threads", "2"},
      {"minloglevel", "2"},
      {"hard_vocab_limit", "false"},
  };
  VectorSentenceIterator iterator(sentences);
  std::string serialized;
  sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(args, &iterator, &serialized);
  if (!status.ok()) {
    *error = status.ToString();
    return "";
  }
  if (serialized.empty()) *error = "SentencePiece training produced no model";
  return serialized;
}

}  // namespace hlab::data::internal

namespace hlab::data {

void EnableSentencePiece() {
  internal::SentencePieceLibrary library;
  library.from_serialized = &internal::LoadFromLibrary;
  library.train = &internal::TrainWithLibrary;
  internal::RegisterSentencePieceLibrary(library);
}

}  // namespace hlab::data
