#include "report/row_source.h"
#include <unistd.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hlab::report {

absl::StatusOr<std::unique_ptr<DatabaseRowSource>> DatabaseRowSource::Open(
    const std::string& path) {
  if (path.empty() || access(path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot read database '", path,
                     "'; give the coordinator's database file (e.g. "
                     "hlab-up/hlab.db)"));
  }
  absl::StatusOr<std::unique_ptr<store::QueryEngine>> engine =
      store::QueryEngine::Open(path);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<DatabaseRowSource>(
      new DatabaseRowSource(path, *std::move(engine)));
}

absl::StatusOr<store::QueryResult> DatabaseRowSource::Query(
    const std::string& sql) {
  store::QueryOptions options;
  options.max_rows = 1000000;
  options.time_limit = absl::Minutes(5);
  absl::StatusOr<store::QueryResult> result = engine_->Run(sql, options);
  if (result.ok() && result->truncated) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", options.max_rows, " rows from ", path_));
  }
  return result;
}

std::optional<double> RealValue(const store::Value& value) {
  if (const auto* d = std::get_if<double>(&value)) {
    if (std::isfinite(*d)) return *d;
    return std::nullopt;
  }
  if (const auto* i = std::get_if<int64_t>(&value)) {
    return static_cast<double>(*i);
  }
  return std::nullopt;
}

std::string TextValue(const store::Value& value) {
  const auto* s = std::get_if<std::string>(&value);
  return s != nullptr ? *s : std::string();
}

}  // namespace hlab::report
