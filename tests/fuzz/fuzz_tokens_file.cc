// libFuzzer target: the coordinator's tokens file (coordinator/server/auth.h
// Authorizer::FromText: "role token" lines, '#' comments). Any text gives
// an authorizer or an InvalidArgument naming the line, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "coordinator/server/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hlab::coordinator::Authorizer> auth =
      hlab::coordinator::Authorizer::FromText(text);
  if (!auth.ok() &&
      auth.status().code() != absl::StatusCode::kInvalidArgument) {
    abort();
  }
  return 0;
}
