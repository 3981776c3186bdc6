// A thin wrapper around Debian's libsentencepiece that uses only standard
// types. sentencepiece_processor.h declares `namespace absl { using
// std::string_view; }`, which clashes with abseil's own absl::string_view, so
// no translation unit may include both: this header includes no abseil and
// no SentencePiece header, and sentencepiece_backend.cc includes no abseil.
//
// Thread-safety: a loaded SentencePieceBackend is safe for concurrent const
// calls. TrainSentencePieceModel is thread-compatible.
//
//   std::string error;
//   auto sp = SentencePieceBackend::Load(path, &error);  // null on error
//   std::vector<int> ids = sp->Encode("hello");
#ifndef HLAB_DATA_INTERNAL_SENTENCEPIECE_BACKEND_H_
#define HLAB_DATA_INTERNAL_SENTENCEPIECE_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

namespace hlab::data::internal {

class SentencePieceBackend {
 public:
  // Parses a serialized model (the bytes of a .model file). Returns null and
  // sets `*error` when they are not a valid model, or when this program has
  // no SentencePiece (see RegisterSentencePieceLibrary).
  static std::unique_ptr<SentencePieceBackend> FromSerialized(
      const std::string& serialized, std::string* error);
  virtual ~SentencePieceBackend() = default;

  virtual std::vector<int> Encode(const std::string& text) const = 0;
  // Encode(text), with each piece's [begin, end) bytes of `text` appended to
  // `begins` and `ends` as SentencePiece reports them (every byte-fallback
  // piece of a character after the first: an empty span at its end).
  virtual std::vector<int> EncodeWithOffsets(const std::string& text,
                                             std::vector<int>* begins,
                                             std::vector<int>* ends) const = 0;
  virtual bool IsByte(int id) const = 0;  // a byte-fallback piece <0xNN>
  virtual std::string Decode(const std::vector<int>& ids) const = 0;
  virtual int piece_size() const = 0;
  virtual int eos_id() const = 0;  // -1 when the model has none
  virtual int pad_id() const = 0;  // -1 when the model has none
};

// Trains a model on `sentences` (one training sentence each; long documents
// should be split into lines first). `model_type` is "bpe" or "unigram".
// The model is lossless: identity normalization, whitespace kept, bytes as
// fallback pieces; ids 0-3 are pad, unk, bos, eos. Returns the serialized
// model, or an empty string and sets `*error`.
std::string TrainSentencePieceModel(const std::vector<std::string>& sentences,
                                    int vocab_size,
                                    const std::string& model_type,
                                    std::string* error);

// Debian's libsentencepiece embeds its own copy of protobuf-lite and exports
// its symbols, which clash with the libprotobuf that LibTorch and gRPC load:
// a process that loads both crashes at start-up. So the library is linked
// only into programs without LibTorch or gRPC (hlab-data, the data tests),
// through target hlab::data_sentencepiece, whose EnableSentencePiece()
// (data/sentencepiece_support.h) registers these two entry points. Elsewhere
// FromSerialized and TrainSentencePieceModel fail with a message naming
// hlab-data.
struct SentencePieceLibrary {
  std::unique_ptr<SentencePieceBackend> (*from_serialized)(
      const std::string& serialized, std::string* error) = nullptr;
  std::string (*train)(const std::vector<std::string>& sentences,
                       int vocab_size, const std::string& model_type,
                       std::string* error) = nullptr;
};
void RegisterSentencePieceLibrary(const SentencePieceLibrary& library);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_SENTENCEPIECE_BACKEND_H_
