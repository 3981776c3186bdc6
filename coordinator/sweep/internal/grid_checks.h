// Checks of the sweep grid shared by the validator: scales, budgets, and
// every (architecture, scale, budget) run resolved through model/config.
// Internal to coordinator/sweep; ValidateSweepSpec is the public entry.
//
// Thread-safe (pure functions). Specs must have defaults applied.
//
//   HLAB_RETURN_IF_ERROR(CheckGrid(spec));
//   HLAB_RETURN_IF_ERROR(CheckModelsAndBudgets(spec));
#ifndef HLAB_COORDINATOR_SWEEP_INTERNAL_GRID_CHECKS_H_
#define HLAB_COORDINATOR_SWEEP_INTERNAL_GRID_CHECKS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::sweep::internal {

// InvalidArgument "<field>: <what>".
inline absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// "field[i]".
inline std::string Index(const std::string& field, int i) {
  return absl::StrCat(field, "[", i, "]");
}

// OK when value <= limit (coordinator/sweep/limits.h), else
// "<field>: <value> <unit> is over the limit of <limit>".
template <typename T>
absl::Status AtMost(const std::string& field, T value, T limit,
                    const std::string& unit = "") {
  if (value <= limit) return absl::OkStatus();
  return Bad(field, absl::StrCat(value, unit.empty() ? "" : " ", unit,
                                 " is over the limit of ", limit,
                                 " (coordinator/sweep/limits.h)"));
}

// A name: at most kMaxNameLength characters.
absl::Status CheckName(const std::string& field, const std::string& name);

template <typename Names>
bool Contains(const Names& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> ScaleNames(const hlab::v1::SweepSpec& spec);
std::vector<std::string> ArchitectureNames(const hlab::v1::SweepSpec& spec);

// Architectures, scales (dimensions, per-scale overrides, the Full backbone
// through ValidateModelConfig) and budgets (sweep-wide and per scale).
absl::Status CheckGrid(const hlab::v1::SweepSpec& spec);

// Resolves every (architecture, scale) model (windows within seq_len,
// parameter matching) and checks each run: more steps than the warmup, a
// decay phase, budgets that stay distinct after rounding, and no two grid
// points that are the same run.
absl::Status CheckModelsAndBudgets(const hlab::v1::SweepSpec& spec);

}  // namespace hlab::sweep::internal

#endif  // HLAB_COORDINATOR_SWEEP_INTERNAL_GRID_CHECKS_H_
