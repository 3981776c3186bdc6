// libFuzzer target: checkpoint files (train/checkpoint_file.h): the magic,
// the header's size and JSON, the payload's size and SHA-256. The input is
// written as a file (under $TMPDIR, a tmpfs in CI where possible) and read
// back with ReadCheckpointMeta and ReadCheckpoint: a corrupt, truncated or
// oversized file gives DataLoss, never a crash or a huge allocation.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "train/checkpoint_file.h"

namespace {

std::string ScratchFile() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/hlab-fuzz-ckpt-" +
         std::to_string(::getpid()) + ".ckpt";
}

bool Expected(const absl::Status& s) {
  return s.ok() || s.code() == absl::StatusCode::kDataLoss;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = ScratchFile();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data),
              static_cast<std::streamsize>(size));
  }
  if (!Expected(hlab::train::ReadCheckpointMeta(path).status())) abort();
  if (!Expected(hlab::train::ReadCheckpoint(path).status())) abort();
  return 0;
}
