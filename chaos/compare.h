// What a sweep left in its database, as the chaos driver compares it: the
// runs and their states, every metric point that is not a timing (loss, lr,
// grad norm, validation losses; not tokens/s), every evaluation, and how
// many keys are stored twice. Two databases of the same spec, one run with
// faults and one without, must hold the same of each, bit for bit.
//
// Thread-safe: pure functions over database files (read-only).
//
//   HLAB_ASSIGN_OR_RETURN(SweepRecord clean, ReadSweepRecord("a/hlab.db"));
//   HLAB_ASSIGN_OR_RETURN(SweepRecord faulty, ReadSweepRecord("b/hlab.db"));
//   Comparison c = CompareRecords(clean, faulty);
//   if (!c.Equal()) std::cerr << c.Summary();
#ifndef HLAB_CHAOS_COMPARE_H_
#define HLAB_CHAOS_COMPARE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hlab::chaos {

struct SweepRecord {
  std::map<std::string, std::string> runs;    // run id -> state
  std::map<std::string, std::string> points;  // run/name/step -> value tokens
  std::map<std::string, std::string> evals;   // run/metric/step -> value
  int64_t duplicated_keys = 0;  // metric or eval keys stored more than once
};

// Reads the record of the database at `db_path`. Unavailable when it cannot
// be opened or read.
absl::StatusOr<SweepRecord> ReadSweepRecord(const std::string& db_path);

struct Comparison {
  int64_t runs = 0;  // runs of the fault-free record
  int64_t points = 0;
  int64_t evals = 0;
  int64_t lost_runs = 0;         // not SUCCEEDED (or missing) where they were
  int64_t differing_points = 0;  // missing, extra or with another value
  int64_t differing_evals = 0;
  int64_t duplicated_keys = 0;        // in the faulty record
  std::vector<std::string> examples;  // the first few differences

  bool Equal() const {
    return lost_runs == 0 && differing_points == 0 && differing_evals == 0 &&
           duplicated_keys == 0;
  }
  // "0 lost runs of 6, 0 duplicated keys, 0 differing points of 7620, ...".
  std::string Summary() const;
};

// `faulty` against `clean`.
Comparison CompareRecords(const SweepRecord& clean, const SweepRecord& faulty);

}  // namespace hlab::chaos

#endif  // HLAB_CHAOS_COMPARE_H_
