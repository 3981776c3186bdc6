#include "data/gpt2_tokenizer.h"

#include <atomic>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/internal/byte_level.h"
#include "data/internal/files.h"
#include "data/internal/gpt2_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace hlab::data {
namespace {

constexpr int32_t kEndOfText = 50256;
// Per-thread cache of piece -> ids, cleared when it grows past this.
constexpr size_t kCacheEntries = 1 << 16;

std::atomic<uint64_t> next_instance_id{1};

// Words repeat, so each thread remembers the ids of pieces it has encoded,
// for one tokenizer instance at a time (ids are never reused, unlike
// addresses).
struct PieceCache {
  uint64_t instance_id = 0;
  std::unordered_map<std::string, std::vector<int32_t>> ids;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Load(
    const std::string& dir) {
  std::string encoder_path = dir + "/encoder.json";
  std::string merges_path = dir + "/vocab.bpe";
  HLAB_ASSIGN_OR_RETURN(std::string encoder_text,
                        internal::ReadFileToString(encoder_path));
  HLAB_ASSIGN_OR_RETURN(std::string merges_text,
                        internal::ReadFileToString(merges_path));
  std::unique_ptr<Gpt2Tokenizer> tok(new Gpt2Tokenizer);
  tok->dir_ = dir;
  tok->instance_id_ = next_instance_id++;
  for (int b = 0; b < 256; ++b) {
    tok->byte_to_unicode_[b] =
        internal::ByteLevelCharacter(static_cast<unsigned char>(b));
  }

  nlohmann::json encoder = nlohmann::json::parse(encoder_text, nullptr, false);
  if (encoder.is_discarded() || !encoder.is_object()) {
    return absl::DataLossError(
        absl::StrCat("not a GPT-2 encoder (JSON object): ", encoder_path));
  }
  tok->decoder_.resize(encoder.size());
  for (auto it = encoder.begin(); it != encoder.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() >= static_cast<int64_t>(encoder.size())) {
      return absl::DataLossError(
          absl::StrCat("bad id for token '", it.key(), "' in ", encoder_path));
    }
    int32_t id = it.value().get<int32_t>();
    tok->encoder_[it.key()] = id;
    std::string raw;
    if (id == kEndOfText) {
      raw = it.key();
    } else if (!internal::ByteLevelDecode(it.key(), &raw)) {
      return absl::DataLossError(absl::StrCat(
          "token '", it.key(), "' is not byte-level in ", encoder_path));
    }
    tok->decoder_[id] = std::move(raw);
  }
  auto eot = tok->encoder_.find("<|endoftext|>");
  if (eot == tok->encoder_.end() || eot->second != kEndOfText) {
    return absl::DataLossError(
        absl::StrCat("no <|endoftext|> with id 50256 in ", encoder_path));
  }

  for (const std::string& symbol : tok->byte_to_unicode_) {
    if (tok->encoder_.count(symbol) == 0) {
      return absl::DataLossError(absl::StrCat("byte symbol '", symbol,
                                              "' missing from ", encoder_path));
    }
  }

  int rank = 0;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(merges_text, '\n')) {
    ++line_number;
    if (line.empty() || (line_number == 1 && line[0] == '#')) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2 ||
        tok->encoder_.count(absl::StrCat(parts[0], parts[1])) == 0) {
      return absl::DataLossError(absl::StrCat("bad merge at ", merges_path, ":",
                                              line_number, ": '", line, "'"));
    }
    tok->merge_ranks_[std::string(line)] = rank++;
  }

  tok->vocabulary_.size = static_cast<int64_t>(tok->decoder_.size());
  tok->vocabulary_.end_of_document = kEndOfText;
  tok->vocabulary_.pad = kEndOfText;
  tok->vocabulary_.tokenizer = absl::StrCat(
      "gpt2:", internal::Sha256Hex(absl::StrCat(encoder_text, merges_text))
                   .substr(0, 16));
  return tok;
}

void Gpt2Tokenizer::EncodePiece(absl::string_view piece,
                                std::vector<int32_t>* ids) const {
  std::vector<std::string> word;
  word.reserve(piece.size());
  for (char c : piece) {
    word.push_back(byte_to_unicode_[static_cast<unsigned char>(c)]);
  }
  // Merge the lowest-ranked adjacent pair, everywhere it occurs, until no
  // adjacent pair is a merge.
  while (word.size() > 1) {
    int best_rank = INT_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merge_ranks_.find(absl::StrCat(word[i], " ", word[i + 1]));
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == INT_MAX) break;
    std::string first = word[best];
    std::string second = word[best + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(std::move(word[i]));
        ++i;
      }
    }
    word = std::move(merged);
  }
  for (const std::string& symbol : word) {
    // Every single byte and every merge result is in the encoder (checked
    // at load), so the lookup cannot fail.
    ids->push_back(encoder_.at(symbol));
  }
}

void Gpt2Tokenizer::EncodeTo(absl::string_view text, std::vector<int32_t>* ids,
                             std::vector<ByteSpan>* spans) const {
  thread_local PieceCache cache;
  if (cache.instance_id != instance_id_ || cache.ids.size() >= kCacheEntries) {
    cache.ids.clear();
    cache.instance_id = instance_id_;
  }
  std::string key;
  for (absl::string_view piece : internal::Gpt2PreTokenize(text)) {
    key.assign(piece.data(), piece.size());
    auto it = cache.ids.find(key);
    if (it == cache.ids.end()) {
      std::vector<int32_t> piece_ids;
      EncodePiece(piece, &piece_ids);
      it = cache.ids.emplace(key, std::move(piece_ids)).first;
    }
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    if (spans == nullptr) continue;
    // A piece's tokens are its bytes in order (BPE only merges neighbours).
    int64_t begin = piece.data() - text.data();
    for (int32_t id : it->second) {
      int64_t end = begin + static_cast<int64_t>(decoder_[id].size());
      spans->push_back({begin, end});
      begin = end;
    }
  }
}

std::vector<int32_t> Gpt2Tokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  EncodeTo(text, &ids, nullptr);
  return ids;
}

EncodedText Gpt2Tokenizer::EncodeWithOffsets(absl::string_view text) const {
  EncodedText encoded;
  EncodeTo(text, &encoded.ids, &encoded.spans);
  return encoded;
}

std::string Gpt2Tokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id == kEndOfText) {
      out.push_back('\n');
    } else if (id >= 0 && id < vocabulary_.size) {
      out += decoder_[id];
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  return out;
}

}  // namespace hlab::data
