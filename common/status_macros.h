// Status propagation macros for absl::Status / absl::StatusOr<T>.
//
// Debian's abseil (20220623) ships no status macros, so hlab defines them once
// here. Thread-safe: they are plain control flow.
//
//   absl::StatusOr<Config> Load(const std::string& path) {
//     HLAB_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     HLAB_RETURN_IF_ERROR(Validate(text));
//     return Parse(text);
//   }
#ifndef HLAB_COMMON_STATUS_MACROS_H_
#define HLAB_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function if `expr` is not OK.
#define HLAB_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status hlab_status_ = (expr);        \
    if (!hlab_status_.ok()) return hlab_status_; \
  } while (false)

#define HLAB_STATUS_CONCAT_INNER_(a, b) a##b
#define HLAB_STATUS_CONCAT_(a, b) HLAB_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (a StatusOr<T>); returns its status if not OK, otherwise
// moves the value into `lhs` (which may be a declaration).
#define HLAB_ASSIGN_OR_RETURN(lhs, rexpr)                                    \
  HLAB_ASSIGN_OR_RETURN_IMPL_(HLAB_STATUS_CONCAT_(hlab_statusor_, __LINE__), \
                              lhs, rexpr)

#define HLAB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)  \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // HLAB_COMMON_STATUS_MACROS_H_
