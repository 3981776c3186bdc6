#include "model/llama/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_reader.h"
#include "common/status_macros.h"

namespace hlab::model::llama {
namespace {

using Json = nlohmann::json;

// Hugging Face's own reader refuses headers over 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

absl::Status Malformed(const std::string& file, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(file, ": ", what,
                   " (not a safetensors file, or a damaged one: download it "
                   "again)"));
}

absl::StatusOr<SafetensorsDType> ParseDType(const std::string& name) {
  if (name == "F64") return SafetensorsDType::kF64;
  if (name == "F32") return SafetensorsDType::kF32;
  if (name == "F16") return SafetensorsDType::kF16;
  if (name == "BF16") return SafetensorsDType::kBF16;
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype ", name, " is not read by hlab (F64, F32, F16 and BF16 are)"));
}

absl::StatusOr<SafetensorsTensor> ParseEntry(const std::string& file,
                                             const std::string& name,
                                             const Json& entry,
                                             uint64_t data_bytes) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!entry.is_object()) return Malformed(file, where + " is not an object");
  SafetensorsTensor t;
  t.name = name;
  t.file = file;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return Malformed(file, where + " has no dtype string");
  }
  auto parsed = ParseDType(dtype->get<std::string>());
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat(file, ": ", where, ": ", parsed.status().message()));
  }
  t.dtype = *parsed;
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return Malformed(file, where + " has no shape list");
  }
  uint64_t elements = 1;
  for (const Json& d : *shape) {
    if (!HoldsInteger<int64_t>(d) || d.get<int64_t>() < 0) {
      return Malformed(file, where +
                                 " has a shape entry that is not an "
                                 "integer >= 0");
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim) {
      return Malformed(file, where + "'s shape overflows");
    }
    elements *= dim;
    t.shape.push_back(d.get<int64_t>());
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !HoldsInteger<int64_t>((*offsets)[0]) ||
      !HoldsInteger<int64_t>((*offsets)[1]) ||
      (*offsets)[0].get<int64_t>() < 0 || (*offsets)[1].get<int64_t>() < 0) {
    return Malformed(file, where +
                               " has no data_offsets [begin, end] of "
                               "integers >= 0");
  }
  const uint64_t begin = (*offsets)[0].get<uint64_t>();
  const uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data_bytes) {
    return Malformed(
        file, absl::StrCat(where, ": data_offsets [", begin, ", ", end,
                           "] lie outside the ", data_bytes, " bytes of data"));
  }
  const size_t size = SafetensorsDTypeSize(t.dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / size ||
      end - begin != elements * size) {
    return Malformed(
        file,
        absl::StrCat(where, ": data_offsets [", begin, ", ", end, "] hold ",
                     end - begin, " bytes, but ", SafetensorsDTypeName(t.dtype),
                     " [", absl::StrJoin(t.shape, ", "), "] needs ",
                     elements * size));
  }
  t.bytes = static_cast<size_t>(end - begin);
  // `data` is set by the caller from the data start + begin.
  t.data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(begin));
  return t;
}

}  // namespace

absl::string_view SafetensorsDTypeName(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF64:
      return "F64";
    case SafetensorsDType::kF32:
      return "F32";
    case SafetensorsDType::kF16:
      return "F16";
    case SafetensorsDType::kBF16:
      return "BF16";
  }
  return "?";
}

size_t SafetensorsDTypeSize(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF64:
      return 8;
    case SafetensorsDType::kF32:
      return 4;
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16:
      return 2;
  }
  return 1;
}

absl::StatusOr<std::map<std::string, SafetensorsTensor>> ParseSafetensors(
    absl::string_view bytes, const std::string& file) {
  if (bytes.size() < 8) {
    return Malformed(file, absl::StrCat("it has ", bytes.size(),
                                        " bytes, fewer than the 8-byte "
                                        "header length"));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes = (header_bytes << 8) | static_cast<uint8_t>(bytes[i]);
  }
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8) {
    return Malformed(file, absl::StrCat("its header length ", header_bytes,
                                        " exceeds the file (", bytes.size(),
                                        " bytes) or 100 MB"));
  }
  auto header = ParseJsonText(bytes.substr(8, header_bytes),
                              absl::StrCat(file, ": header"));
  if (!header.ok()) return absl::DataLossError(header.status().message());
  if (!header->is_object()) return Malformed(file, "its header is not a map");
  const uint64_t data_begin = 8 + header_bytes;
  const uint64_t data_bytes = bytes.size() - data_begin;
  const uint8_t* data =
      reinterpret_cast<const uint8_t*>(bytes.data()) + data_begin;
  std::map<std::string, SafetensorsTensor> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& item : header->items()) {
    if (item.key() == "__metadata__") continue;
    HLAB_ASSIGN_OR_RETURN(
        SafetensorsTensor t,
        ParseEntry(file, item.key(), item.value(), data_bytes));
    const auto begin =
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data));
    ranges.emplace_back(begin, begin + t.bytes);
    t.data = data + begin;
    tensors.emplace(item.key(), std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return Malformed(
          file, absl::StrCat("two tensors share bytes ", ranges[i].first, "-",
                             ranges[i - 1].second));
    }
  }
  return tensors;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping,
                        MappedFile::Open(path));
  const absl::string_view bytes(reinterpret_cast<const char*>(mapping->data()),
                                mapping->size());
  HLAB_ASSIGN_OR_RETURN(auto tensors, ParseSafetensors(bytes, path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->mapping_ = std::move(mapping);
  file->tensors_ = std::move(tensors);
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>>
SafetensorsCheckpoint::Open(const std::string& dir) {
  std::unique_ptr<SafetensorsCheckpoint> out(new SafetensorsCheckpoint());
  const std::string single = absl::StrCat(dir, "/model.safetensors");
  const std::string index_path =
      absl::StrCat(dir, "/model.safetensors.index.json");
  auto index_map = MappedFile::Open(index_path);
  if (!index_map.ok() && !absl::IsNotFound(index_map.status())) {
    return index_map.status();
  }
  if (!index_map.ok()) {
    auto file = SafetensorsFile::Open(single);
    if (absl::IsNotFound(file.status())) {
      return absl::NotFoundError(absl::StrCat(
          dir,
          ": neither model.safetensors nor model.safetensors.index.json "
          "is there (give a Hugging Face model directory with "
          "safetensors weights; .bin weights are not read)"));
    }
    if (!file.ok()) return file.status();
    for (const auto& [name, t] : (*file)->tensors()) out->index_[name] = &t;
    out->files_.push_back(*std::move(file));
    out->description_ = "model.safetensors";
    return out;
  }
  const absl::string_view text(
      reinterpret_cast<const char*>((*index_map)->data()),
      (*index_map)->size());
  auto index = ParseJsonText(text, index_path);
  if (!index.ok()) return absl::DataLossError(index.status().message());
  auto weight_map = index->find("weight_map");
  if (!index->is_object() || weight_map == index->end() ||
      !weight_map->is_object()) {
    return absl::DataLossError(
        absl::StrCat(index_path,
                     ": no \"weight_map\" object of tensor -> "
                     "shard file"));
  }
  std::map<std::string, SafetensorsFile*> shards;
  for (const auto& item : weight_map->items()) {
    if (!item.value().is_string()) {
      return absl::DataLossError(absl::StrCat(
          index_path, ": weight_map['", item.key(), "'] is not a file name"));
    }
    const std::string shard = item.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos) {
      return absl::DataLossError(absl::StrCat(index_path, ": weight_map['",
                                              item.key(), "'] = '", shard,
                                              "' is not a file name in ", dir));
    }
    if (shards.count(shard) == 0) {
      HLAB_ASSIGN_OR_RETURN(
          auto file, SafetensorsFile::Open(absl::StrCat(dir, "/", shard)));
      shards[shard] = file.get();
      out->files_.push_back(std::move(file));
    }
    const auto& in_shard = shards[shard]->tensors();
    auto it = in_shard.find(item.key());
    if (it == in_shard.end()) {
      return absl::DataLossError(absl::StrCat(index_path, ": tensor '",
                                              item.key(), "' is not in ", shard,
                                              ", where the index puts it"));
    }
    out->index_[item.key()] = &it->second;
  }
  // A tensor in a shard that the index puts elsewhere is ambiguous; one the
  // index does not name is not read.
  for (const auto& [shard, file] : shards) {
    for (const auto& [name, t] : file->tensors()) {
      auto named = out->index_.find(name);
      if (named != out->index_.end() && named->second != &t) {
        return absl::DataLossError(absl::StrCat(index_path, ": tensor '", name,
                                                "' is in ", shard, " and in ",
                                                named->second->file));
      }
    }
  }
  out->description_ =
      absl::StrCat("model.safetensors.index.json (", shards.size(), " shards)");
  return out;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(
    const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::string EncodeSafetensors(
    const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::string data;
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", std::string(SafetensorsDTypeName(e.dtype))},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
    data += e.bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text + data;
}

}  // namespace hlab::model::llama
