#include "train/libtorch_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hlab::train {

absl::Status LibTorchStatus(const c10::Error& error) {
  const std::string what = error.what_without_backtrace();
  if (absl::StrContains(what, "out of memory") ||
      absl::StrContains(what, "DefaultCPUAllocator")) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory: ", what));
  }
  return absl::InternalError(absl::StrCat("LibTorch error: ", what));
}

}  // namespace hlab::train
