// Store: live predictions, one generation per refit of a running sweep's
// laws (tables prediction_generations and predictions, schema v8).
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/store.h"

namespace hlab::store {
namespace {

absl::Status CheckPrediction(const Prediction& p) {
  const std::string what = absl::StrCat("prediction of run ", p.run_id);
  if (p.target != "loss" && p.target != "longppl" && p.target != "train_loss") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": target '", p.target,
                     "' (expected loss, longppl or train_loss)"));
  }
  if (p.method != "profile" && p.method != "bootstrap" && p.method != "fit" &&
      p.method != "curve") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": method '", p.method,
                     "' (expected profile, bootstrap, fit or curve)"));
  }
  const bool finite = std::isfinite(p.predicted) &&
                      (!p.lower || std::isfinite(*p.lower)) &&
                      (!p.upper || std::isfinite(*p.upper));
  if (!finite) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": values must be finite (an open side is absent)"));
  }
  return absl::OkStatus();
}

void BindOptional(Statement& st, int index, const std::optional<double>& v) {
  if (v) {
    st.Bind(index, *v);
  } else {
    st.BindNull(index);
  }
}

}  // namespace

absl::StatusOr<int64_t> Store::RecordPredictions(
    const PredictionGeneration& generation, absl::Time now) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const Prediction& p : generation.predictions) {
    HLAB_RETURN_IF_ERROR(CheckPrediction(p));
    if (!seen.emplace(p.run_id, p.target).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "two predictions of run ", p.run_id, " and target ", p.target));
    }
  }
  const int64_t sweep_id = generation.sweep_id;
  int64_t number = 0;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT coalesce(max(generation), 0) + 1 FROM"
                     " prediction_generations WHERE sweep_id = ?"));
      st.Bind(1, sweep_id);
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      number = has_row ? st.ColumnInt(0) : 1;
    }
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("INSERT INTO prediction_generations (sweep_id,"
                     " generation, created_at, n_succeeded, laws)"
                     " VALUES (?, ?, ?, ?, ?)"));
      st.Bind(1, sweep_id).Bind(2, number).Bind(3, ToMillis(now));
      st.Bind(4, generation.n_succeeded).Bind(5, generation.laws);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement member,
        db.Prepare("SELECT 1 FROM sweep_runs WHERE sweep_id = ? AND"
                   " run_id = ?"));
    HLAB_ASSIGN_OR_RETURN(
        Statement insert,
        db.Prepare("INSERT INTO predictions (run_id, sweep_id, generation,"
                   " target, predicted, lower, upper, method, n_points)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    for (const Prediction& p : generation.predictions) {
      member.Reset();
      member.Bind(1, sweep_id).Bind(2, p.run_id);
      HLAB_ASSIGN_OR_RETURN(bool is_member, member.Step());
      if (!is_member) {
        // The writer rolls the whole transaction back.
        return absl::InvalidArgumentError(absl::StrCat(
            "prediction of run ", p.run_id, ": not a run of sweep ", sweep_id));
      }
      insert.Reset();
      insert.Bind(1, p.run_id).Bind(2, sweep_id).Bind(3, number);
      insert.Bind(4, p.target).Bind(5, p.predicted);
      BindOptional(insert, 6, p.lower);
      BindOptional(insert, 7, p.upper);
      insert.Bind(8, p.method).Bind(9, p.n_points);
      HLAB_RETURN_IF_ERROR(insert.Run());
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return number;
}

absl::StatusOr<std::optional<PredictionGeneration>> Store::LatestPredictions(
    int64_t sweep_id) {
  HLAB_RETURN_IF_ERROR(GetSweep(sweep_id).status());
  absl::MutexLock lock(&reader_mu_);
  PredictionGeneration out;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        reader_->Prepare("SELECT generation, created_at, n_succeeded, laws"
                         " FROM prediction_generations WHERE sweep_id = ?"
                         " ORDER BY generation DESC LIMIT 1"));
    st.Bind(1, sweep_id);
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) return std::optional<PredictionGeneration>();
    out.sweep_id = sweep_id;
    out.generation = st.ColumnInt(0);
    out.created_at = FromMillis(st.ColumnInt(1));
    out.n_succeeded = static_cast<int>(st.ColumnInt(2));
    out.laws = st.ColumnText(3);
  }
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      reader_->Prepare("SELECT run_id, target, predicted, lower, upper,"
                       " method, n_points FROM predictions WHERE sweep_id = ?"
                       " AND generation = ? ORDER BY run_id, target"));
  st.Bind(1, sweep_id).Bind(2, out.generation);
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    Prediction p;
    p.run_id = st.ColumnText(0);
    p.target = st.ColumnText(1);
    p.predicted = st.ColumnDouble(2);
    if (!st.IsNull(3)) p.lower = st.ColumnDouble(3);
    if (!st.IsNull(4)) p.upper = st.ColumnDouble(4);
    p.method = st.ColumnText(5);
    p.n_points = static_cast<int>(st.ColumnInt(6));
    out.predictions.push_back(std::move(p));
  }
  return std::optional<PredictionGeneration>(std::move(out));
}

}  // namespace hlab::store
