#include "fits/run_figures.h"

#include <cmath>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fits/internal/values.h"

namespace hlab::fits {
namespace {

using internal::Real;
using internal::Text;

// ", (the newest value of eval `metric` of the run)".
std::string Newest(const char* metric) {
  return absl::StrCat(
      ", (SELECT e.value FROM evals e WHERE e.run_id = rs.run_id AND "
      "e.metric = '",
      metric, "' ORDER BY e.step DESC LIMIT 1)");
}

}  // namespace

std::optional<double> RunFigures::Target(const std::string& target) const {
  if (target == "loss") return val_loss ? val_loss : train_loss;
  if (target == "longppl") return log_longppl;
  return std::nullopt;
}

absl::StatusOr<std::vector<RunFigures>> ReadRunFigures(const RunQuery& query,
                                                       int64_t sweep_id) {
  const std::string sql = absl::StrCat(
      "SELECT rs.run_id, rs.arch, rs.scale, rs.state, rs.n_params,"
      " rs.budget_tokens, rs.final_train_loss, rs.final_val_loss",
      Newest("log_longppl"),
      ", (SELECT e.value FROM evals e WHERE e.run_id = rs.run_id"
      "    AND e.metric = 'longppl' AND e.value > 0"
      "    ORDER BY e.step DESC LIMIT 1)",
      Newest("niah_acc"), Newest("rf_full_delta_val_loss"),
      Newest("rf_full_delta_log_longppl"),
      Newest("rf_efficient_delta_val_loss"),
      Newest("rf_efficient_delta_log_longppl"), Newest("grad_reach"),
      ", (SELECT e.details FROM evals e WHERE e.run_id = rs.run_id AND "
      "e.metric = 'grad_reach' ORDER BY e.step DESC LIMIT 1)",
      Newest("probe_acc"),
      ", (SELECT e.details FROM evals e WHERE e.run_id = rs.run_id AND "
      "e.metric = 'probe_acc' ORDER BY e.step DESC LIMIT 1)",
      Newest("retrieval_score"),
      ", (SELECT e.details FROM evals e WHERE e.run_id = rs.run_id AND "
      "e.metric = 'retrieval_score' ORDER BY e.step DESC LIMIT 1)"
      ", rs.seed"
      " FROM run_summary rs JOIN sweep_runs sr ON sr.run_id = rs.run_id"
      " WHERE sr.sweep_id = ",
      sweep_id, " ORDER BY rs.arch, rs.n_params, rs.budget_tokens, rs.run_id");
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result, query(sql));
  std::vector<RunFigures> runs;
  runs.reserve(result.rows.size());
  for (const auto& row : result.rows) {
    if (row.size() != 22) continue;
    RunFigures r;
    r.run_id = Text(row[0]);
    r.arch = Text(row[1]);
    r.scale = Text(row[2]);
    r.state = Text(row[3]);
    r.n = Real(row[4]).value_or(0);
    r.d = Real(row[5]).value_or(0);
    r.train_loss = Real(row[6]);
    r.val_loss = Real(row[7]);
    r.log_longppl = Real(row[8]);
    if (!r.log_longppl) {
      const std::optional<double> ppl = Real(row[9]);
      if (ppl && *ppl > 0) r.log_longppl = std::log(*ppl);
    }
    r.niah_accuracy = Real(row[10]);
    r.rf_full_delta_loss = Real(row[11]);
    r.rf_full_delta_log_longppl = Real(row[12]);
    r.rf_efficient_delta_loss = Real(row[13]);
    r.rf_efficient_delta_log_longppl = Real(row[14]);
    r.grad_reach = Real(row[15]);
    r.grad_profile = Text(row[16]);
    r.probe_accuracy = Real(row[17]);
    r.probe_layers = Text(row[18]);
    r.retrieval_score = Real(row[19]);
    r.retrieval_heads = Text(row[20]);
    r.seed = static_cast<int64_t>(Real(row[21]).value_or(0));
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace hlab::fits
