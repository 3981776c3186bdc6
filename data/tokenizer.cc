#include "data/tokenizer.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "data/byte_tokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace hlab::data {
namespace {

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kByteTokenizerName[] = "byte";

class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer() : vocabulary_(ByteVocabulary()) {}

  std::vector<int32_t> Encode(absl::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      ids[i] = static_cast<unsigned char>(text[i]);
    }
    return ids;
  }

  EncodedText EncodeWithOffsets(absl::string_view text) const override {
    EncodedText encoded;
    encoded.ids = Encode(text);
    encoded.spans.resize(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      encoded.spans[i] = {static_cast<int64_t>(i), static_cast<int64_t>(i + 1)};
    }
    return encoded;
  }

  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      if (id >= 0 && id < 256) {
        out.push_back(static_cast<char>(id));
      } else if (id == kByteEndOfDocument) {
        out.push_back('\n');
      } else if (id != kBytePad) {
        out += kReplacementCharacter;
      }
    }
    return out;
  }

  const Vocabulary& vocabulary() const override { return vocabulary_; }
  std::string spec() const override { return kByteTokenizerName; }

 private:
  Vocabulary vocabulary_;
};

// `path` itself when absolute or when there is no base directory.
std::string Resolve(absl::string_view path, absl::string_view base_dir) {
  if (base_dir.empty() || absl::StartsWith(path, "/")) return std::string(path);
  return absl::StrCat(base_dir, "/", path);
}

}  // namespace

Vocabulary ByteVocabulary() {
  Vocabulary vocab;
  vocab.size = kByteVocabSize;
  vocab.end_of_document = kByteEndOfDocument;
  vocab.pad = kBytePad;
  vocab.tokenizer = kByteTokenizerName;
  return vocab;
}

std::unique_ptr<Tokenizer> MakeByteTokenizer() {
  return std::make_unique<ByteTokenizer>();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    absl::string_view full_spec, absl::string_view base_dir) {
  absl::string_view spec = full_spec;
  if (spec == kByteTokenizerName) return MakeByteTokenizer();
  if (absl::ConsumePrefix(&spec, "sentencepiece:") && !spec.empty()) {
    absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok =
        SentencePieceTokenizer::Load(Resolve(spec, base_dir));
    if (!tok.ok()) return tok.status();
    return std::unique_ptr<Tokenizer>(std::move(tok).value());
  }
  if (absl::ConsumePrefix(&spec, "gpt2:") && !spec.empty()) {
    absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tok =
        Gpt2Tokenizer::Load(Resolve(spec, base_dir));
    if (!tok.ok()) return tok.status();
    return std::unique_ptr<Tokenizer>(std::move(tok).value());
  }
  if (absl::ConsumePrefix(&spec, "hf:") && !spec.empty()) {
    absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
        HfTokenizer::Load(Resolve(spec, base_dir));
    if (!tok.ok()) return tok.status();
    return std::unique_ptr<Tokenizer>(std::move(tok).value());
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tokenizer spec '", full_spec,
      "': expected byte, sentencepiece:PATH.model, gpt2:DIR or hf:DIR"));
}

}  // namespace hlab::data
