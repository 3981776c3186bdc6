// How a coordinator that is up but cannot write its database says so.
//
// The store refuses a write it could not make on a full disk, a read-only
// file or file system or an I/O error with Unavailable, its message starting
// with kStoreNotWritable (coordinator/store/writer.h). Clients tell that
// apart from a coordinator they cannot reach: the CLI prints the message
// as it is, a worker keeps its reports and retries without counting the
// coordinator as unreachable. docs/operations.md, "Disk full and read-only
// storage".
//
// Thread-safe (constants and a pure function).
//
//   absl::Status s = client->ReportMetrics(req, &resp);
//   if (IsStoreNotWritable(s)) HLAB_LOG(WARNING) << s;  // kept, retried
#ifndef HLAB_COMMON_STORE_UNAVAILABLE_H_
#define HLAB_COMMON_STORE_UNAVAILABLE_H_

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace hlab {

// The start of the message of such an Unavailable.
inline constexpr char kStoreNotWritable[] =
    "the coordinator cannot write its database";

// Whether `message` (a status or gRPC error message) is such a refusal.
inline bool IsStoreNotWritableMessage(absl::string_view message) {
  return absl::StartsWith(message, kStoreNotWritable);
}

inline bool IsStoreNotWritable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         IsStoreNotWritableMessage(status.message());
}

}  // namespace hlab

#endif  // HLAB_COMMON_STORE_UNAVAILABLE_H_
