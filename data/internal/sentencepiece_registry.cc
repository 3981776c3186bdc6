// The SentencePiece entry points registered by EnableSentencePiece() (see
// sentencepiece_backend.h for why they are not linked directly).
#include <atomic>

#include "data/internal/sentencepiece_backend.h"

namespace hlab::data::internal {
namespace {

std::atomic<const SentencePieceLibrary*> g_library{nullptr};

constexpr char kUnavailable[] =
    "SentencePiece is not available in this program (Debian's "
    "libsentencepiece clashes with the protobuf that LibTorch and gRPC "
    "load): prepare SentencePiece datasets with hlab-data";

}  // namespace

void RegisterSentencePieceLibrary(const SentencePieceLibrary& library) {
  static SentencePieceLibrary registered;
  registered = library;
  g_library.store(&registered);
}

std::unique_ptr<SentencePieceBackend> SentencePieceBackend::FromSerialized(
    const std::string& serialized, std::string* error) {
  const SentencePieceLibrary* library = g_library.load();
  if (library == nullptr) {
    *error = kUnavailable;
    return nullptr;
  }
  return library->from_serialized(serialized, error);
}

std::string TrainSentencePieceModel(const std::vector<std::string>& sentences,
                                    int vocab_size,
                                    const std::string& model_type,
                                    std::string* error) {
  const SentencePieceLibrary* library = g_library.load();
  if (library == nullptr) {
    *error = kUnavailable;
    return "";
  }
  return library->train(sentences, vocab_size, model_type, error);
}

}  // namespace hlab::data::internal
