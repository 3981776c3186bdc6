#include "chaos/compare.h"

#include <cstdio>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/query.h"

namespace hlab::chaos {
namespace {

// Exact text of a cell: doubles with 17 significant digits (round-trip).
std::string Exact(const store::Value& v) {
  if (const double* d = std::get_if<double>(&v)) {
    char buffer[40];
    std::snprintf(buffer, sizeof(buffer), "%.17g", *d);
    return buffer;
  }
  return store::ValueToString(v);
}

// Rows of `sql` as key (the first `key_columns` cells) -> the others.
absl::Status ReadMap(store::QueryEngine& db, const std::string& sql,
                     size_t key_columns,
                     std::map<std::string, std::string>* out) {
  store::QueryOptions options;
  options.max_rows = 100'000'000;
  options.time_limit = absl::Minutes(10);
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result, db.Run(sql, options));
  for (const auto& row : result.rows) {
    std::string key, value;
    for (size_t c = 0; c < row.size(); ++c) {
      std::string& part = c < key_columns ? key : value;
      if (!part.empty()) part += '/';
      part += Exact(row[c]);
    }
    (*out)[key] = value;
  }
  return absl::OkStatus();
}

void Note(Comparison* c, const std::string& what) {
  if (c->examples.size() < 10) c->examples.push_back(what);
}

// Counts the keys of `clean` missing from or different in `faulty`, and
// those only in `faulty`.
int64_t Differ(const std::map<std::string, std::string>& clean,
               const std::map<std::string, std::string>& faulty,
               const char* what, Comparison* c) {
  int64_t n = 0;
  for (const auto& [key, value] : clean) {
    auto it = faulty.find(key);
    if (it == faulty.end()) {
      ++n;
      Note(c, absl::StrCat(what, " ", key, ": missing"));
    } else if (it->second != value) {
      ++n;
      Note(c, absl::StrCat(what, " ", key, ": ", it->second, " instead of ",
                           value));
    }
  }
  for (const auto& [key, value] : faulty) {
    if (clean.count(key) == 0) {
      ++n;
      Note(c, absl::StrCat(what, " ", key, ": extra (", value, ")"));
    }
  }
  return n;
}

}  // namespace

absl::StatusOr<SweepRecord> ReadSweepRecord(const std::string& db_path) {
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<store::QueryEngine> db,
                        store::QueryEngine::Open(db_path));
  SweepRecord r;
  HLAB_RETURN_IF_ERROR(ReadMap(*db, "SELECT id, state FROM runs", 1, &r.runs));
  // Timings differ between any two runs; everything else must not.
  HLAB_RETURN_IF_ERROR(
      ReadMap(*db,
              "SELECT run_id, name, step, value, tokens FROM metrics"
              " WHERE name NOT LIKE '%per_s%' AND name NOT LIKE '%seconds%'",
              3, &r.points));
  HLAB_RETURN_IF_ERROR(ReadMap(
      *db, "SELECT run_id, metric, step, value FROM evals", 3, &r.evals));
  store::QueryOptions options;
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult dup,
      db->Run("SELECT (SELECT count(*) FROM (SELECT 1 FROM metrics"
              "   GROUP BY run_id, name, step HAVING count(*) > 1))"
              " + (SELECT count(*) FROM (SELECT 1 FROM evals"
              "   GROUP BY run_id, metric, step HAVING count(*) > 1))",
              options));
  if (!dup.rows.empty()) {
    if (const int64_t* n = std::get_if<int64_t>(&dup.rows[0][0])) {
      r.duplicated_keys = *n;
    }
  }
  return r;
}

Comparison CompareRecords(const SweepRecord& clean, const SweepRecord& faulty) {
  Comparison c;
  c.runs = static_cast<int64_t>(clean.runs.size());
  c.points = static_cast<int64_t>(clean.points.size());
  c.evals = static_cast<int64_t>(clean.evals.size());
  for (const auto& [run, state] : clean.runs) {
    auto it = faulty.runs.find(run);
    const std::string got = it == faulty.runs.end() ? "missing" : it->second;
    if (got != state) {
      ++c.lost_runs;
      Note(&c, absl::StrCat("run ", run, ": ", got, " instead of ", state));
    }
  }
  c.differing_points = Differ(clean.points, faulty.points, "point", &c);
  c.differing_evals = Differ(clean.evals, faulty.evals, "eval", &c);
  c.duplicated_keys = faulty.duplicated_keys;
  return c;
}

std::string Comparison::Summary() const {
  return absl::StrCat(lost_runs, " lost runs of ", runs, ", ", duplicated_keys,
                      " duplicated keys, ", differing_points,
                      " differing points of ", points, ", ", differing_evals,
                      " differing evals of ", evals);
}

}  // namespace hlab::chaos
