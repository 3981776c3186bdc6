// No abseil header may be included here (see sentencepiece_backend.h).
#include "data/internal/sentencepiece_backend.h"
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

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

struct SentencePieceBackend::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceBackend::SentencePieceBackend() : impl_(new Impl) {}
SentencePieceBackend::~SentencePieceBackend() = default;

std::unique_ptr<SentencePieceBackend> SentencePieceBackend::FromSerialized(
    const std::string& serialized, std::string* error) {
  std::unique_ptr<SentencePieceBackend> backend(new SentencePieceBackend);
  sentencepiece::util::Status status =
      backend->impl_->processor.LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return backend;
}

std::vector<int> SentencePieceBackend::Encode(const std::string& text) const {
  return impl_->processor.EncodeAsIds(text);
}

std::string SentencePieceBackend::Decode(const std::vector<int>& ids) const {
  return impl_->processor.DecodeIds(ids);
}

int SentencePieceBackend::piece_size() const {
  return impl_->processor.GetPieceSize();
}
int SentencePieceBackend::eos_id() const { return impl_->processor.eos_id(); }
int SentencePieceBackend::pad_id() const { return impl_->processor.pad_id(); }

std::string TrainSentencePieceModel(const std::vector<std::string>& sentences,
                                    int vocab_size,
                                    const std::string& model_type,
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
