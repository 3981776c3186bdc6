#include "eval/key_token_cache.h"
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;

Json KeyJson(const KeyTokenCacheKey& key) {
  // The config exactly as the entry stores it.
  KeyTokens empty;
  empty.config = key.config;
  return {{"reference_sha256", key.reference_sha256},
          {"dataset", key.dataset},
          {"documents", key.documents},
          {"config", Json::parse(KeyTokensToJson(empty)).at("config")}};
}

absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the key-token cache directory '",
                     target.parent_path().string(), "': ", ec.message()));
  }
  const std::string temp =
      absl::StrCat(path, ".tmp-", ::getpid(), "-", std::random_device{}());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto os_error = [&](const char* what) {
    return absl::UnavailableError(
        absl::StrCat("cannot ", what, " key-token cache entry '", temp,
                     "': ", std::strerror(errno), " (check cache_dir)"));
  };
  if (fd < 0) return os_error("create");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const absl::Status error = os_error("write");
      ::close(fd);
      ::unlink(temp.c_str());
      return error;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const absl::Status error = os_error("sync");
    ::unlink(temp.c_str());
    return error;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const absl::Status error = os_error("rename");
    ::unlink(temp.c_str());
    return error;
  }
  return absl::OkStatus();
}

}  // namespace

const char* CacheOutcomeName(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::kDisabled:
      return "disabled";
    case CacheOutcome::kHit:
      return "hit";
    case CacheOutcome::kMiss:
      return "miss";
    case CacheOutcome::kRecomputed:
      return "recomputed";
  }
  return "disabled";
}

std::string KeyTokenCache::PathFor(const KeyTokenCacheKey& key) const {
  if (dir_.empty()) return "";
  return (std::filesystem::path(dir_) / "longppl-keys" /
          (Sha256Hex(KeyJson(key).dump()) + ".json"))
      .string();
}

absl::StatusOr<KeyTokens> KeyTokenCache::GetOrCompute(
    const KeyTokenCacheKey& key,
    const std::function<absl::StatusOr<KeyTokens>()>& compute,
    std::vector<std::string>* warnings, CacheOutcome* outcome) {
  CacheOutcome unused;
  if (outcome == nullptr) outcome = &unused;
  if (dir_.empty()) {
    *outcome = CacheOutcome::kDisabled;
    return compute();
  }
  const std::string path = PathFor(key);
  const Json want = KeyJson(key);
  *outcome = CacheOutcome::kMiss;
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    const Json entry = Json::parse(text.str(), nullptr, false);
    std::string problem;
    if (entry.is_discarded() || !entry.is_object() || !entry.contains("key") ||
        !entry.contains("key_tokens")) {
      problem = "is not a cache entry (malformed JSON)";
    } else if (entry["key"] != want) {
      problem = "was written for another key";
    } else {
      auto keys = KeyTokensFromJson(entry["key_tokens"].dump());
      if (keys.ok()) {
        *outcome = CacheOutcome::kHit;
        return keys;
      }
      problem = std::string(keys.status().message());
    }
    warnings->push_back(absl::StrCat("key-token cache entry '", path, "' ",
                                     problem, ": recomputing it"));
    *outcome = CacheOutcome::kRecomputed;
  }
  absl::StatusOr<KeyTokens> keys = compute();
  if (!keys.ok()) return keys;
  const Json entry = {{"key", want},
                      {"key_tokens", Json::parse(KeyTokensToJson(*keys))}};
  const absl::Status written = WriteAtomically(path, entry.dump());
  if (!written.ok()) return written;
  return keys;
}

}  // namespace hlab::eval
