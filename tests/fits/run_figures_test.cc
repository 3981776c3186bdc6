// ReadRunFigures (fits/run_figures.h), the one reader of a sweep's
// runs with their final figures for the fits and the report: the query it
// runs and how it reads each column, against canned rows.
#include "fits/run_figures.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hlab::fits {
namespace {

using store::Value;

// rf: the receptive-field changes (full loss, full log LongPPL, efficient
// loss, efficient log LongPPL), null by default.
std::vector<Value> Row(const std::string& id, const std::string& state,
                       Value train, Value val, Value log_longppl, Value longppl,
                       Value niah, std::vector<Value> rf = {{}, {}, {}, {}},
                       Value grad_reach = {}, Value grad_profile = {},
                       Value probe_acc = {}, Value probe_layers = {},
                       Value retrieval_score = {}, Value retrieval_heads = {},
                       Value seed = int64_t{0}) {
  std::vector<Value> row = {id,
                            "full",
                            "S1",
                            state,
                            int64_t{1000000},
                            int64_t{2000000},
                            train,
                            val,
                            log_longppl,
                            longppl,
                            niah};
  row.insert(row.end(), rf.begin(), rf.end());
  row.push_back(grad_reach);
  row.push_back(grad_profile);
  row.push_back(probe_acc);
  row.push_back(probe_layers);
  row.push_back(retrieval_score);
  row.push_back(retrieval_heads);
  row.push_back(seed);
  return row;
}

TEST(RunFiguresTest, ReadsEveryRunAndItsFigures) {
  std::string asked;
  const RunQuery query = [&](const std::string& sql) {
    asked = sql;
    store::QueryResult result;
    const Value null;
    result.rows.push_back(Row("a", "SUCCEEDED", 3.5, 3.25, 1.5, 9.0, 0.75,
                              {0.01, 1.0, 0.001, 0.1}, 32.0,
                              std::string("{\"bins\": []}"), 0.625,
                              std::string("{\"layers\": []}"), 0.5,
                              std::string("{\"heads\": []}"), int64_t{3}));
    // No log_longppl: the log of longppl; no validation loss.
    result.rows.push_back(Row("b", "FAILED", 4.0, null, null, 2.0, null));
    // Not finite, or a longppl that has no log: unknown.
    result.rows.push_back(Row("c", "PENDING", null,
                              std::numeric_limits<double>::infinity(), null,
                              0.0, null));
    return result;
  };
  absl::StatusOr<std::vector<RunFigures>> runs = ReadRunFigures(query, 7);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_NE(asked.find("WHERE sr.sweep_id = 7 ORDER BY rs.arch, rs.n_params"),
            std::string::npos)
      << asked;
  EXPECT_EQ(asked.find("SUCCEEDED"), std::string::npos);  // every state
  ASSERT_EQ(runs->size(), 3u);
  const RunFigures& a = (*runs)[0];
  EXPECT_EQ(a.run_id, "a");
  EXPECT_EQ(a.arch, "full");
  EXPECT_EQ(a.scale, "S1");
  EXPECT_TRUE(a.succeeded());
  EXPECT_EQ(a.n, 1e6);
  EXPECT_EQ(a.d, 2e6);
  EXPECT_EQ(a.seed, 3);
  EXPECT_NE(asked.find("rs.seed"), std::string::npos);
  EXPECT_EQ(a.Target("loss"), 3.25);  // validation first
  EXPECT_EQ(a.Target("longppl"), 1.5);
  EXPECT_EQ(a.niah_accuracy, 0.75);
  EXPECT_EQ(a.rf_full_delta_loss, 0.01);
  EXPECT_EQ(a.rf_full_delta_log_longppl, 1.0);
  EXPECT_EQ(a.rf_efficient_delta_loss, 0.001);
  EXPECT_EQ(a.rf_efficient_delta_log_longppl, 0.1);
  EXPECT_EQ(a.grad_reach, 32.0);
  EXPECT_EQ(a.grad_profile, "{\"bins\": []}");
  EXPECT_EQ(a.probe_accuracy, 0.625);
  EXPECT_EQ(a.probe_layers, "{\"layers\": []}");
  EXPECT_NE(asked.find("'probe_acc'"), std::string::npos);
  EXPECT_EQ(a.retrieval_score, 0.5);
  EXPECT_EQ(a.retrieval_heads, "{\"heads\": []}");
  EXPECT_NE(asked.find("'retrieval_score'"), std::string::npos);
  EXPECT_NE(asked.find("'rf_efficient_delta_log_longppl'"), std::string::npos);
  EXPECT_EQ(a.Target("perplexity"), std::nullopt);
  const RunFigures& b = (*runs)[1];
  EXPECT_FALSE(b.succeeded());
  EXPECT_EQ(b.seed, 0);
  EXPECT_EQ(b.Target("loss"), 4.0);  // training loss without validation
  ASSERT_TRUE(b.log_longppl.has_value());
  EXPECT_DOUBLE_EQ(*b.log_longppl, std::log(2.0));
  EXPECT_EQ(b.niah_accuracy, std::nullopt);
  EXPECT_EQ(b.rf_full_delta_log_longppl, std::nullopt);
  EXPECT_EQ(b.grad_profile, "");
  EXPECT_EQ(b.probe_accuracy, std::nullopt);
  EXPECT_EQ(b.probe_layers, "");
  EXPECT_EQ(b.retrieval_score, std::nullopt);
  EXPECT_EQ(b.retrieval_heads, "");
  const RunFigures& c = (*runs)[2];
  EXPECT_EQ(c.val_loss, std::nullopt);
  EXPECT_EQ(c.Target("loss"), std::nullopt);
  EXPECT_EQ(c.log_longppl, std::nullopt);
}

TEST(RunFiguresTest, QueryErrorsComeBackAsTheyAre) {
  const RunQuery failing = [](const std::string&) {
    return absl::StatusOr<store::QueryResult>(
        absl::DeadlineExceededError("query took too long"));
  };
  absl::StatusOr<std::vector<RunFigures>> runs = ReadRunFigures(failing, 1);
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace hlab::fits
