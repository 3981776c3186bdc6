#include "data/hf_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "data/internal/byte_level.h"
#include "data/internal/files.h"
#include "data/internal/gpt2_pretokenizer.h"
#include "data/internal/llama3_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace hlab::data {
namespace {

// Per-thread cache of piece -> ids, cleared when it grows past this; pieces
// longer than kCachedPieceBytes (rare: long symbol or space runs) are not
// cached.
constexpr size_t kCacheEntries = 1 << 16;
constexpr size_t kCachedPieceBytes = 64;

std::atomic<uint64_t> next_instance_id{1};

struct PieceCache {
  uint64_t instance_id = 0;
  absl::flat_hash_map<std::string, std::vector<int32_t>> ids;
};

// The bytes a token (or added token's content) decodes to: Hugging Face's
// ByteLevel decoder maps each character back to its byte, and keeps a
// token with a character outside the alphabet as its UTF-8.
std::string DecodedToken(const std::string& token) {
  std::string bytes;
  if (!internal::ByteLevelDecode(token, &bytes)) bytes = token;
  return bytes;
}

// The token named by tokenizer_config.json's `key` ("<|end_of_text|>" or
// {"content": "<|end_of_text|>", ...}), or "" when it names none.
std::string ConfigToken(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") &&
      (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

// The id of the token `name` (an added token's content, else a vocabulary
// entry), or -1. A linear search: it runs twice a load.
int32_t TokenId(const internal::HfTokenizerJson& def, absl::string_view name) {
  for (const internal::HfAddedToken& added : def.added_tokens) {
    if (added.content == name) return added.id;
  }
  for (const auto& [token, id] : def.vocab) {
    if (token == name) return id;
  }
  return -1;
}

// end_of_document and pad (see the header): tokenizer_config.json's
// eos_token and pad_token when it names them, else the only special token.
absl::Status EndOfDocumentAndPad(const internal::HfTokenizerJson& def,
                                 const std::string& json_path,
                                 const std::string& config_path, int32_t* eos,
                                 int32_t* pad) {
  std::vector<int32_t> specials;
  for (const internal::HfAddedToken& added : def.added_tokens) {
    if (added.special) specials.push_back(added.id);
  }
  std::string eos_name, pad_name;
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    HLAB_ASSIGN_OR_RETURN(std::string config_text,
                          internal::ReadFileToString(config_path));
    absl::StatusOr<nlohmann::json> config =
        ParseJsonText(config_text, config_path);
    if (!config.ok() || !config->is_object()) {
      return absl::DataLossError(absl::StrCat(
          "not a tokenizer_config.json (JSON object): ", config_path));
    }
    eos_name = ConfigToken(*config, "eos_token");
    pad_name = ConfigToken(*config, "pad_token");
  }
  if (!eos_name.empty()) {
    *eos = TokenId(def, eos_name);
    if (*eos < 0) {
      return absl::DataLossError(
          absl::StrCat("eos_token \"", eos_name, "\" is not a token of ",
                       json_path, " (", config_path, ")"));
    }
  } else if (specials.size() == 1) {
    *eos = specials[0];
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        json_path, ": cannot tell the end-of-document token (", specials.size(),
        " special added tokens and no eos_token in ", config_path, ")"));
  }
  *pad = *eos;
  if (!pad_name.empty()) {
    *pad = TokenId(def, pad_name);
    if (*pad < 0) {
      return absl::DataLossError(
          absl::StrCat("pad_token \"", pad_name, "\" is not a token of ",
                       json_path, " (", config_path, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(
    const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  HLAB_ASSIGN_OR_RETURN(std::string json_text,
                        internal::ReadFileToString(json_path));
  HLAB_ASSIGN_OR_RETURN(internal::HfTokenizerJson def,
                        internal::ParseHfTokenizerJson(json_text, json_path));
  std::unique_ptr<HfTokenizer> tok(new HfTokenizer);
  tok->dir_ = dir;
  tok->instance_id_ = next_instance_id++;
  HLAB_RETURN_IF_ERROR(tok->Build(def, json_path));

  int32_t eos = -1;
  int32_t pad = -1;
  HLAB_RETURN_IF_ERROR(EndOfDocumentAndPad(
      def, json_path, dir + "/tokenizer_config.json", &eos, &pad));
  tok->vocabulary_.end_of_document = eos;
  tok->vocabulary_.pad = pad;
  tok->vocabulary_.tokenizer = absl::StrCat(
      "hf:",
      internal::Sha256Hex(absl::StrCat(json_text, "\neos ", eos, " pad ", pad))
          .substr(0, 16));
  return tok;
}

absl::Status HfTokenizer::Build(const internal::HfTokenizerJson& def,
                                const std::string& json_path) {
  splits_ = def.splits;
  ignore_merges_ = def.ignore_merges;
  template_prefix_ = def.template_prefix;
  template_suffix_ = def.template_suffix;

  int64_t size = 0;
  for (const auto& [token, id] : def.vocab) {
    size = std::max<int64_t>(size, id + 1);
  }
  for (const internal::HfAddedToken& added : def.added_tokens) {
    size = std::max<int64_t>(size, added.id + 1);
  }
  vocabulary_.size = size;
  decoded_.assign(static_cast<size_t>(size), "");
  has_id_.assign(static_cast<size_t>(size), false);

  // Byte-level text -> id, viewing the strings of `def`.
  absl::flat_hash_map<absl::string_view, int32_t> mapped;
  mapped.reserve(def.vocab.size());
  vocab_.reserve(def.vocab.size());
  for (const auto& [token, id] : def.vocab) {
    if (has_id_[id]) {
      return absl::DataLossError(
          absl::StrCat(json_path, ": model.vocab gives id ", id, " twice"));
    }
    has_id_[id] = true;
    if (!mapped.emplace(token, id).second) {
      return absl::DataLossError(absl::StrCat(
          json_path, ": model.vocab has the token \"", token, "\" twice"));
    }
    std::string bytes;
    if (internal::ByteLevelDecode(token, &bytes)) {
      vocab_.emplace(bytes, id);
      decoded_[id] = std::move(bytes);
    } else {
      decoded_[id] = token;
    }
  }
  for (int b = 0; b < 256; ++b) {
    const std::string& symbol =
        internal::ByteLevelCharacter(static_cast<unsigned char>(b));
    auto it = mapped.find(symbol);
    if (it == mapped.end()) {
      return absl::DataLossError(
          absl::StrCat(json_path, ": model.vocab has no token for byte ", b,
                       " (\"", symbol, "\"): not a byte-level BPE"));
    }
    merger_.SetByteId(static_cast<unsigned char>(b), it->second);
  }
  merger_.Reserve(def.merges.size());
  std::string joined;
  for (size_t i = 0; i < def.merges.size(); ++i) {
    const auto& [left, right] = def.merges[i];
    joined.assign(left).append(right);
    int32_t ids[3];
    const absl::string_view tokens[3] = {left, right, joined};
    for (int k = 0; k < 3; ++k) {
      auto it = mapped.find(tokens[k]);
      if (it == mapped.end()) {
        return absl::DataLossError(absl::StrCat(
            json_path, ": model.merges[", i, "] \"", left, " ", right, "\": \"",
            tokens[k], "\" is not in model.vocab"));
      }
      ids[k] = it->second;
    }
    merger_.AddMerge(ids[0], ids[1], ids[2]);
  }
  for (const internal::HfAddedToken& added : def.added_tokens) {
    has_id_[added.id] = true;
    decoded_[added.id] = DecodedToken(added.content);
    AddedTokenPass& pass = added_passes_[added.normalized ? 1 : 0];
    pass.by_first_byte[static_cast<unsigned char>(added.content[0])]
        .emplace_back(added.content, added.id);
    pass.empty = false;
  }
  for (const std::vector<int32_t>* ids :
       {&template_prefix_, &template_suffix_}) {
    for (int32_t id : *ids) {
      if (id >= size || !has_id_[id]) {
        return absl::DataLossError(
            absl::StrCat(json_path, ": the post_processor's template has id ",
                         id, ", which no token has"));
      }
    }
  }
  for (AddedTokenPass& pass : added_passes_) {
    for (auto& bucket : pass.by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(),
                       [](const auto& a, const auto& b) {
                         return a.first.size() > b.first.size();
                       });
    }
  }
  return absl::OkStatus();
}

void HfTokenizer::SplitAddedTokens(const AddedTokenPass& pass,
                                   const std::vector<Segment>& in,
                                   std::vector<Segment>* out) {
  out->clear();
  for (const Segment& segment : in) {
    if (segment.id >= 0) {
      out->push_back(segment);
      continue;
    }
    absl::string_view text = segment.text;
    size_t start = 0;
    for (size_t pos = 0; pos < text.size();) {
      const auto& bucket =
          pass.by_first_byte[static_cast<unsigned char>(text[pos])];
      size_t matched = 0;
      for (const auto& [content, id] : bucket) {
        if (text.substr(pos, content.size()) == content) {
          if (pos > start)
            out->push_back({text.substr(start, pos - start), -1});
          out->push_back({text.substr(pos, content.size()), id});
          matched = content.size();
          break;
        }
      }
      pos += matched > 0 ? matched : 1;
      if (matched > 0) start = pos;
    }
    if (start < text.size()) out->push_back({text.substr(start), -1});
  }
}

void HfTokenizer::PreTokenize(absl::string_view text,
                              std::vector<absl::string_view>* pieces) const {
  auto split = [](internal::HfSplit kind, absl::string_view piece,
                  std::vector<absl::string_view>* out) {
    if (kind == internal::HfSplit::kLlama3) {
      internal::Llama3PreTokenize(piece, out);
    } else {
      for (absl::string_view p : internal::Gpt2PreTokenize(piece)) {
        out->push_back(p);
      }
    }
  };
  if (splits_.empty()) {
    pieces->push_back(text);
    return;
  }
  if (splits_.size() == 1) {
    split(splits_[0], text, pieces);
    return;
  }
  std::vector<absl::string_view> current = {text};
  std::vector<absl::string_view> next;
  for (internal::HfSplit kind : splits_) {
    next.clear();
    for (absl::string_view piece : current) split(kind, piece, &next);
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
}

void HfTokenizer::EncodePiece(absl::string_view piece,
                              std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  merger_.Encode(piece, ids);
}

void HfTokenizer::EncodeTo(absl::string_view text, std::vector<int32_t>* ids,
                           std::vector<ByteSpan>* spans) const {
  thread_local PieceCache cache;
  if (cache.instance_id != instance_id_ || cache.ids.size() >= kCacheEntries) {
    cache.ids.clear();
    cache.instance_id = instance_id_;
  }
  std::vector<Segment> segments = {{text, -1}};
  std::vector<Segment> split;
  for (const AddedTokenPass& pass : added_passes_) {
    if (pass.empty) continue;
    SplitAddedTokens(pass, segments, &split);
    segments.swap(split);
  }
  ids->reserve(ids->size() + text.size() / 3);
  // The spans of the ids appended since `first`, which spell the piece
  // `piece`: a piece's tokens are its bytes in order.
  auto add_spans = [&](size_t first, absl::string_view piece) {
    if (spans == nullptr) return;
    int64_t begin = piece.data() - text.data();
    for (size_t i = first; i < ids->size(); ++i) {
      int64_t end = begin + static_cast<int64_t>(decoded_[(*ids)[i]].size());
      spans->push_back({begin, end});
      begin = end;
    }
  };
  std::vector<absl::string_view> pieces;
  for (const Segment& segment : segments) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
      if (spans != nullptr) {
        int64_t begin = segment.text.data() - text.data();
        spans->push_back(
            {begin, begin + static_cast<int64_t>(segment.text.size())});
      }
      continue;
    }
    if (segment.text.empty()) continue;
    pieces.clear();
    PreTokenize(segment.text, &pieces);
    for (absl::string_view piece : pieces) {
      const size_t first = ids->size();
      if (piece.size() > kCachedPieceBytes) {
        EncodePiece(piece, ids);
        add_spans(first, piece);
        continue;
      }
      auto it = cache.ids.find(piece);
      if (it == cache.ids.end()) {
        std::vector<int32_t> piece_ids;
        EncodePiece(piece, &piece_ids);
        it = cache.ids.emplace(std::string(piece), std::move(piece_ids)).first;
      }
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      add_spans(first, piece);
    }
  }
}

std::vector<int32_t> HfTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  EncodeTo(text, &ids, nullptr);
  return ids;
}

EncodedText HfTokenizer::EncodeWithOffsets(absl::string_view text) const {
  EncodedText encoded;
  EncodeTo(text, &encoded.ids, &encoded.spans);
  return encoded;
}

std::string HfTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id == vocabulary_.end_of_document) {
      out.push_back('\n');
    } else if (id == vocabulary_.pad) {
      continue;
    } else if (id >= 0 && id < vocabulary_.size && has_id_[id]) {
      out += decoded_[id];
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  return out;
}

}  // namespace hlab::data
