// SHA-256 (OpenSSL) as lowercase hex: run ids and spec hashes, checkpoint
// and shard checksums, tokenizer identities.
//
// Thread-safety: Sha256Hex is thread-safe; a Sha256 object is not.
//
//   std::string id = Sha256Hex(canonical_json).substr(0, 16);
//   Sha256 sha;                      // incremental, for large files
//   sha.Update(chunk.data(), chunk.size());
//   std::string digest = sha.HexDigest();
#ifndef HLAB_COMMON_SHA256_H_
#define HLAB_COMMON_SHA256_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace hlab {

// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  std::string HexDigest();  // finishes; call once

 private:
  void* ctx_;  // EVP_MD_CTX*
};

}  // namespace hlab

#endif  // HLAB_COMMON_SHA256_H_
