// libFuzzer target: a prepared dataset's manifest.json (data/shard_format.h
// ParseManifest), the header every shard is read by. Any text gives a
// manifest or an error naming the file, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hlab::data::Manifest> manifest =
      hlab::data::ParseManifest(text, "manifest.json");
  if (manifest.ok()) (void)hlab::data::ManifestToJson(*manifest);
  return 0;
}
