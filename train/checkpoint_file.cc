#include "train/checkpoint_file.h"
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_reader.h"

namespace hlab::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kMagic[] = "HLABCKPT1\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetU64(const std::string& in, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i]))
         << (8 * i);
  }
  return v;
}

// Marks a storage refusal (IsStorageRefusal).
constexpr char kStorageRefusal[] = "hlab.train/storage-refusal";

absl::Status OsError(absl::string_view what, const std::string& path) {
  const int error = errno;
  absl::Status status = absl::UnavailableError(
      absl::StrCat(what, " '", path, "': ", std::strerror(error)));
  if (error == ENOSPC || error == EDQUOT || error == EROFS || error == EFBIG ||
      error == EIO) {
    status.SetPayload(kStorageRefusal, absl::Cord("1"));
  }
  return status;
}

absl::Status WriteAll(int fd, const std::string& data,
                      const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("cannot write checkpoint", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointMeta> ParseMeta(const std::string& text,
                                         const std::string& path) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path, "' has a malformed header"));
  }
  // Counts must be integers: converting another number would be undefined.
  for (const char* key : {"step", "tokens", "branch_budget_tokens"}) {
    const auto it = j.find(key);
    if (it != j.end() && !HoldsInteger<int64_t>(*it)) {
      return absl::DataLossError(absl::StrCat("checkpoint '", path,
                                              "' has a malformed header: ", key,
                                              " is not an integer"));
    }
  }
  CheckpointMeta m;
  try {
    m.step = j.at("step").get<int64_t>();
    m.tokens = j.at("tokens").get<int64_t>();
    m.kind = j.at("kind").get<std::string>();
    m.branch_budget_tokens = j.value("branch_budget_tokens", int64_t{0});
    m.model_config = j.at("model_config").get<std::string>();
    m.fingerprint = j.at("fingerprint").get<std::string>();
    m.tokenizer = j.value("tokenizer", std::string());
    m.payload_sha256 = j.at("payload_sha256").get<std::string>();
  } catch (const Json::exception& e) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", path, "' has a malformed header: ", e.what()));
  }
  return m;
}

// Reads the whole file and splits it; verifies the framing only.
absl::StatusOr<CheckpointFile> ReadFramed(const std::string& path,
                                          bool header_only) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read checkpoint '", path, "'"));
  }
  // The sizes the file gives are checked against its length: a flipped
  // byte must not make us allocate what is not there.
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(
      std::max<std::streamoff>(0, static_cast<std::streamoff>(in.tellg())));
  in.seekg(0, std::ios::beg);
  std::string head(kMagicSize + 8, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in || head.compare(0, kMagicSize, kMagic) != 0) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' is not an hlab checkpoint (bad magic)"));
  }
  const uint64_t meta_size = GetU64(head, kMagicSize);
  if (meta_size > (uint64_t{1} << 26) || meta_size > file_size - head.size()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path, "' has a corrupt header size"));
  }
  std::string meta_text(meta_size, '\0');
  in.read(meta_text.data(), static_cast<std::streamsize>(meta_size));
  if (!in) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path, "' is truncated (header)"));
  }
  CheckpointFile file;
  file.path = path;
  auto meta = ParseMeta(meta_text, path);
  if (!meta.ok()) return meta.status();
  file.meta = *std::move(meta);
  if (header_only) return file;
  std::string size_bytes(8, '\0');
  in.read(size_bytes.data(), 8);
  if (!in) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path, "' is truncated (payload size)"));
  }
  const uint64_t payload_size = GetU64(size_bytes, 0);
  if (payload_size != file_size - head.size() - meta_size - 8) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", path, "' is truncated or has trailing bytes (payload ",
        payload_size, " bytes, file ", file_size, " bytes)"));
  }
  file.payload.resize(payload_size);
  in.read(file.payload.data(), static_cast<std::streamsize>(payload_size));
  if (!in || in.peek() != EOF) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", path, "' is truncated or has trailing bytes"));
  }
  return file;
}

}  // namespace

std::string LatestName(int64_t step) {
  return absl::StrFormat("step-%010d.ckpt", step);
}

std::string KeptName(int64_t step) {
  return absl::StrFormat("kept-%010d.ckpt", step);
}

std::string BranchName(int64_t budget_tokens) {
  return absl::StrCat("branch-", budget_tokens, ".ckpt");
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& path,
                                            CheckpointMeta meta,
                                            const std::string& payload) {
  meta.payload_sha256 = Sha256Hex(payload);
  Json j = {{"step", meta.step},
            {"tokens", meta.tokens},
            {"kind", meta.kind},
            {"branch_budget_tokens", meta.branch_budget_tokens},
            {"model_config", meta.model_config},
            {"fingerprint", meta.fingerprint},
            {"tokenizer", meta.tokenizer},
            {"payload_sha256", meta.payload_sha256}};
  const std::string meta_text = j.dump();
  std::string head(kMagic, kMagicSize);
  PutU64(&head, meta_text.size());
  head += meta_text;
  PutU64(&head, payload.size());

  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create checkpoint directory '",
                     target.parent_path().string(), "': ", ec.message()));
  }
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return OsError("cannot create checkpoint", temp);
  absl::Status status = WriteAll(fd, head, temp);
  if (status.ok()) status = WriteAll(fd, payload, temp);
  if (status.ok() && ::fsync(fd) != 0) status = OsError("cannot fsync", temp);
  if (::close(fd) != 0 && status.ok()) status = OsError("cannot close", temp);
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status error = OsError("cannot rename checkpoint into", path);
    ::unlink(temp.c_str());
    return error;
  }
  const int dir_fd =
      ::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return meta.payload_sha256;
}

bool IsStorageRefusal(const absl::Status& status) {
  return status.GetPayload(kStorageRefusal).has_value();
}

absl::StatusOr<CheckpointFile> ReadCheckpoint(const std::string& path) {
  auto file = ReadFramed(path, /*header_only=*/false);
  if (!file.ok()) return file.status();
  if (Sha256Hex(file->payload) != file->meta.payload_sha256) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", path, "' fails its checksum (the file is corrupt)"));
  }
  return file;
}

absl::StatusOr<CheckpointMeta> ReadCheckpointMeta(const std::string& path) {
  auto file = ReadFramed(path, /*header_only=*/true);
  if (!file.ok()) return file.status();
  return file->meta;
}

namespace {

// (step, path) of the checkpoints in `dir`, newest first; unreadable
// headers sort last (step -1) so callers see and skip them after every
// readable candidate.
std::vector<std::pair<int64_t, std::string>> CheckpointsByStep(
    const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::EndsWith(name, ".ckpt")) continue;
    if (!absl::StartsWith(name, "step-") && !absl::StartsWith(name, "kept-") &&
        !absl::StartsWith(name, "branch-")) {
      continue;
    }
    auto meta = ReadCheckpointMeta(entry.path().string());
    found.emplace_back(meta.ok() ? meta->step : -1, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  });
  return found;
}

}  // namespace

std::vector<std::string> ListCheckpoints(const std::string& dir) {
  std::vector<std::string> paths;
  for (auto& [step, path] : CheckpointsByStep(dir)) {
    paths.push_back(std::move(path));
  }
  return paths;
}

std::optional<CheckpointFile> NewestValidCheckpoint(
    const std::string& dir, std::vector<std::string>* warnings,
    int64_t max_step) {
  for (const auto& [step, path] : CheckpointsByStep(dir)) {
    if (max_step >= 0 && step > max_step) continue;  // past the limit
    auto file = ReadCheckpoint(path);
    if (file.ok()) return *std::move(file);
    if (warnings != nullptr) {
      warnings->push_back(absl::StrCat(file.status().message(),
                                       "; using an older checkpoint instead"));
    }
  }
  return std::nullopt;
}

absl::Status PruneCheckpoints(const std::string& dir, int64_t keep_last) {
  std::vector<std::string> latest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "step-") && absl::EndsWith(name, ".ckpt")) {
      latest.push_back(entry.path().string());
    }
  }
  // Zero-padded steps: lexical order is step order.
  std::sort(latest.begin(), latest.end(), std::greater<>());
  for (size_t i = static_cast<size_t>(keep_last); i < latest.size(); ++i) {
    if (!fs::remove(latest[i], ec) && ec) {
      return absl::UnavailableError(absl::StrCat(
          "cannot delete old checkpoint '", latest[i], "': ", ec.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace hlab::train
