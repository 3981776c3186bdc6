#include "data/shard_format.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "data/internal/files.h"
#include "nlohmann/json.hpp"

namespace hlab::data {
namespace {

using Json = nlohmann::ordered_json;

Json ShardToJson(const ShardInfo& shard) {
  return Json{{"tokens_file", shard.tokens_file},
              {"index_file", shard.index_file},
              {"num_documents", shard.num_documents},
              {"num_tokens", shard.num_tokens},
              {"tokens_bytes", shard.tokens_bytes},
              {"index_bytes", shard.index_bytes},
              {"tokens_sha256", shard.tokens_sha256},
              {"index_sha256", shard.index_sha256}};
}

Json SplitToJson(const SplitInfo& split) {
  Json shards = Json::array();
  for (const ShardInfo& shard : split.shards)
    shards.push_back(ShardToJson(shard));
  return Json{{"num_documents", split.num_documents},
              {"num_tokens", split.num_tokens},
              {"max_document_tokens", split.max_document_tokens},
              {"shards", shards}};
}

// j.at(key) as an integer of type T; throws for a float or a value T does
// not hold (ParseManifest turns any exception into DataLoss).
template <typename T>
T IntAt(const Json& j, const char* key) {
  const Json& v = j.at(key);
  if (!HoldsInteger<T>(v)) {
    throw std::out_of_range(absl::StrCat(key, " is not an integer in range"));
  }
  return v.get<T>();
}

ShardInfo ShardFromJson(const Json& j) {
  ShardInfo shard;
  shard.tokens_file = j.at("tokens_file").get<std::string>();
  shard.index_file = j.at("index_file").get<std::string>();
  shard.num_documents = IntAt<int64_t>(j, "num_documents");
  shard.num_tokens = IntAt<int64_t>(j, "num_tokens");
  shard.tokens_bytes = IntAt<int64_t>(j, "tokens_bytes");
  shard.index_bytes = IntAt<int64_t>(j, "index_bytes");
  shard.tokens_sha256 = j.at("tokens_sha256").get<std::string>();
  shard.index_sha256 = j.at("index_sha256").get<std::string>();
  return shard;
}

SplitInfo SplitFromJson(const Json& j) {
  SplitInfo split;
  split.num_documents = IntAt<int64_t>(j, "num_documents");
  split.num_tokens = IntAt<int64_t>(j, "num_tokens");
  split.max_document_tokens = IntAt<int64_t>(j, "max_document_tokens");
  for (const Json& shard : j.at("shards")) {
    split.shards.push_back(ShardFromJson(shard));
  }
  return split;
}

// A file name the manifest may name: no directories, nothing hidden.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos;
}

}  // namespace

std::string TokenTypeFor(int64_t vocab_size) {
  return vocab_size <= 65536 ? "uint16" : "uint32";
}

int TokenBytes(absl::string_view token_type) {
  if (token_type == "uint16") return 2;
  if (token_type == "uint32") return 4;
  return 0;
}

std::string ShardFileName(absl::string_view split, int index,
                          absl::string_view extension) {
  return absl::StrFormat("%s-%05d.%s", split, index, extension);
}

std::string ManifestToJson(const Manifest& m) {
  Json sources = Json::array();
  for (const SourceInfo& source : m.sources) {
    sources.push_back(Json{{"path", source.path},
                           {"format", source.format},
                           {"bytes", source.bytes},
                           {"num_documents", source.num_documents},
                           {"skipped_empty", source.skipped_empty}});
  }
  Json j{{"format_version", m.format_version},
         {"tokenizer_spec", m.tokenizer_spec},
         {"vocabulary", Json{{"size", m.vocabulary.size},
                             {"end_of_document", m.vocabulary.end_of_document},
                             {"pad", m.vocabulary.pad},
                             {"tokenizer", m.vocabulary.tokenizer}}},
         {"token_type", m.token_type},
         {"text_field", m.text_field},
         {"held_out_fraction", m.held_out_fraction},
         {"split_seed", m.split_seed},
         {"shard_tokens", m.shard_tokens},
         {"sources", sources},
         {"train", SplitToJson(m.train)},
         {"heldout", SplitToJson(m.heldout)}};
  return j.dump(2) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view json,
                                       const std::string& path) {
  Json j = Json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(
        absl::StrCat("manifest ", path, " is not JSON; re-run `data prepare`"));
  }
  Manifest m;
  try {
    m.format_version = IntAt<int>(j, "format_version");
    if (m.format_version > kShardFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "manifest ", path, " has format version ", m.format_version,
          "; this build reads up to ", kShardFormatVersion));
    }
    m.tokenizer_spec = j.at("tokenizer_spec").get<std::string>();
    const Json& vocab = j.at("vocabulary");
    m.vocabulary.size = IntAt<int64_t>(vocab, "size");
    m.vocabulary.end_of_document = IntAt<int32_t>(vocab, "end_of_document");
    m.vocabulary.pad = IntAt<int32_t>(vocab, "pad");
    m.vocabulary.tokenizer = vocab.at("tokenizer").get<std::string>();
    m.token_type = j.at("token_type").get<std::string>();
    m.text_field = j.at("text_field").get<std::string>();
    m.held_out_fraction = j.at("held_out_fraction").get<double>();
    m.split_seed = IntAt<uint64_t>(j, "split_seed");
    m.shard_tokens = IntAt<int64_t>(j, "shard_tokens");
    for (const Json& source : j.at("sources")) {
      SourceInfo info;
      info.path = source.at("path").get<std::string>();
      info.format = source.at("format").get<std::string>();
      info.bytes = IntAt<int64_t>(source, "bytes");
      info.num_documents = IntAt<int64_t>(source, "num_documents");
      info.skipped_empty = IntAt<int64_t>(source, "skipped_empty");
      m.sources.push_back(std::move(info));
    }
    m.train = SplitFromJson(j.at("train"));
    m.heldout = SplitFromJson(j.at("heldout"));
  } catch (const std::exception& e) {  // nlohmann's, or IntAt's
    return absl::DataLossError(absl::StrCat("manifest ", path, " is invalid (",
                                            e.what(),
                                            "); re-run `data prepare`"));
  }
  if (TokenBytes(m.token_type) == 0) {
    return absl::DataLossError(absl::StrCat(
        "manifest ", path, " has unknown token type '", m.token_type, "'"));
  }
  for (const SplitInfo* split : {&m.train, &m.heldout}) {
    for (const ShardInfo& shard : split->shards) {
      if (!IsPlainFileName(shard.tokens_file) ||
          !IsPlainFileName(shard.index_file)) {
        return absl::DataLossError(absl::StrCat(
            "manifest ", path, " names a shard outside its directory: '",
            shard.tokens_file, "'"));
      }
    }
  }
  return m;
}

absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  std::string path = (std::filesystem::path(dir) / kManifestFileName).string();
  absl::StatusOr<std::string> text = internal::ReadFileToString(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(
        absl::StrCat("no prepared dataset at ", dir, " (", path,
                     " is missing); run `hlab-data prepare` first"));
  }
  if (!text.ok()) return text.status();
  return ParseManifest(*text, path);
}

}  // namespace hlab::data
