#include "data/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/internal/files.h"
#include "data/internal/sentencepiece_backend.h"

namespace hlab::data {

SentencePieceTokenizer::SentencePieceTokenizer(
    std::unique_ptr<internal::SentencePieceBackend> sp, std::string path,
    Vocabulary vocabulary)
    : sp_(std::move(sp)),
      path_(std::move(path)),
      vocabulary_(std::move(vocabulary)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::Load(const std::string& path) {
  HLAB_ASSIGN_OR_RETURN(std::string serialized,
                        internal::ReadFileToString(path));
  std::string error;
  std::unique_ptr<internal::SentencePieceBackend> sp =
      internal::SentencePieceBackend::FromSerialized(serialized, &error);
  if (sp == nullptr) {
    return absl::DataLossError(
        absl::StrCat("not a SentencePiece model: ", path, " (", error, ")"));
  }
  Vocabulary vocab;
  vocab.size = sp->piece_size();
  vocab.end_of_document = sp->eos_id();
  vocab.pad = sp->pad_id() >= 0 ? sp->pad_id() : sp->eos_id();
  if (vocab.end_of_document < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece model ", path,
        " has no eos piece; hlab needs one to separate documents"));
  }
  vocab.tokenizer = absl::StrCat("sentencepiece:",
                                 internal::Sha256Hex(serialized).substr(0, 16));
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(sp), path, std::move(vocab)));
}

std::vector<int32_t> SentencePieceTokenizer::Encode(
    absl::string_view text) const {
  std::vector<int> ids = sp_->Encode(std::string(text));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

EncodedText SentencePieceTokenizer::EncodeWithOffsets(
    absl::string_view text) const {
  std::vector<int> begins, ends;
  std::vector<int> ids =
      sp_->EncodeWithOffsets(std::string(text), &begins, &ends);
  EncodedText encoded;
  encoded.ids.assign(ids.begin(), ids.end());
  encoded.spans.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    encoded.spans[i] = {begins[i], ends[i]};
  }
  // SentencePiece gives a character's first byte-fallback piece the whole
  // character and the others an empty span: a run of byte pieces that
  // covers exactly as many bytes as it has pieces gets one byte each.
  for (size_t i = 0; i < ids.size();) {
    size_t run_end = i;
    while (run_end < ids.size() && sp_->IsByte(ids[run_end])) ++run_end;
    if (run_end == i) {
      ++i;
      continue;
    }
    int64_t begin = encoded.spans[i].begin;
    int64_t end = encoded.spans[run_end - 1].end;
    if (end - begin == static_cast<int64_t>(run_end - i)) {
      for (size_t k = i; k < run_end; ++k, ++begin) {
        encoded.spans[k] = {begin, begin + 1};
      }
    }
    i = run_end;
  }
  // Tile the text: bytes the normalizer dropped go to the token after them.
  const int64_t size = static_cast<int64_t>(text.size());
  int64_t previous_end = 0;
  for (ByteSpan& span : encoded.spans) {
    span.begin = previous_end;
    span.end = std::min(std::max(span.end, span.begin), size);
    previous_end = span.end;
  }
  if (!encoded.spans.empty()) encoded.spans.back().end = size;
  return encoded;
}

std::string SentencePieceTokenizer::Decode(
    const std::vector<int32_t>& ids) const {
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    if (!run.empty()) out += sp_->Decode(run);
    run.clear();
  };
  for (int32_t id : ids) {
    if (id == vocabulary_.end_of_document) {
      flush();
      out += "\n";
    } else if (id == vocabulary_.pad) {
      flush();
    } else if (id < 0 || id >= vocabulary_.size) {
      flush();
      out += "\xEF\xBF\xBD";  // U+FFFD
    } else {
      run.push_back(id);
    }
  }
  flush();
  return out;
}

absl::Status TrainSentencePiece(const std::vector<std::string>& texts,
                                const SentencePieceTrainOptions& options,
                                const std::string& model_path) {
  if (options.model_type != "bpe" && options.model_type != "unigram") {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece model type must be bpe or unigram, not '",
                     options.model_type, "'"));
  }
  if (options.vocab_size < 300) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece vocab size ", options.vocab_size,
        " is too small: 256 byte pieces and 4 specials need at least 300"));
  }
  std::vector<std::string> sentences;
  for (const std::string& text : texts) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (!line.empty()) sentences.emplace_back(line);
    }
  }
  if (sentences.empty()) {
    return absl::InvalidArgumentError(
        "no text to train a SentencePiece model on");
  }
  std::string error;
  std::string serialized = internal::TrainSentencePieceModel(
      sentences, options.vocab_size, options.model_type, &error);
  if (serialized.empty()) {
    return absl::InternalError(
        absl::StrCat("SentencePiece training failed: ", error));
  }
  std::string temp_path = model_path + ".tmp";
  HLAB_RETURN_IF_ERROR(internal::WriteStringToFile(temp_path, serialized));
  if (std::rename(temp_path.c_str(), model_path.c_str()) != 0) {
    std::remove(temp_path.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", model_path));
  }
  return absl::OkStatus();
}

}  // namespace hlab::data
