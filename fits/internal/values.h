// Reading the cells of a store::QueryResult row: a finite number (an
// integer counts) and a text, for the SQL readers of fits/ (run_figures,
// curve_backtest). Internal to fits/.
//
// Thread-safety: pure functions.
//
//   std::optional<double> loss = internal::Real(row[4]);
//   std::string arch = internal::Text(row[1]);
#ifndef HLAB_FITS_INTERNAL_VALUES_H_
#define HLAB_FITS_INTERNAL_VALUES_H_

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "coordinator/store/query.h"

namespace hlab::fits::internal {

// A finite number (an integer counts), else nullopt.
inline std::optional<double> Real(const store::Value& v) {
  if (const auto* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d)) return *d;
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

// A text cell, else "".
inline std::string Text(const store::Value& v) {
  const auto* s = std::get_if<std::string>(&v);
  return s != nullptr ? *s : std::string();
}

}  // namespace hlab::fits::internal

#endif  // HLAB_FITS_INTERNAL_VALUES_H_
