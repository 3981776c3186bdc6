// Helpers for the report tests: the demo sweep stored through the store
// API with losses (and log LongPPL) from known laws per architecture, its
// true laws stored as fits, and readers for the files a report writes.
#ifndef HLAB_TESTS_REPORT_REPORT_TEST_UTIL_H_
#define HLAB_TESTS_REPORT_REPORT_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "coordinator/store/store.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::report::testing {

namespace fs = std::filesystem;

struct Law {
  double E, A, alpha, B, beta;
  double operator()(double n, double d) const {
    return E + A / std::pow(n, alpha) + B / std::pow(d, beta);
  }
};

// A different law per architecture and target, so a mix-up shows.
inline Law LossLaw(const std::string& arch) {
  static const std::map<std::string, double> kE = {
      {"full", 1.6}, {"swa-16", 1.7}, {"swa-64", 1.8}, {"gdn", 1.9}};
  return Law{kE.at(arch), 400, 0.34, 410, 0.28};
}
inline Law LongPplLaw(const std::string& arch) {
  return Law{LossLaw(arch).E - 0.9, 200, 0.3, 300, 0.25};
}

inline absl::Time Now() { return absl::FromUnixSeconds(1'800'000'000); }

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A CSV file as a header and rows of fields (no quoted fields expected).
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  size_t Column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    ADD_FAILURE() << "no column " << name;
    return 0;
  }
};

inline Csv ReadCsv(const fs::path& path) {
  Csv csv;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (csv.header.empty()) {
      csv.header = fields;
    } else {
      csv.rows.push_back(fields);
    }
  }
  return csv;
}

inline double Number(const std::string& text) {
  double v = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &v)) << "'" << text << "'";
  return v;
}

struct Result {
  int code = 0;
  std::string out, err;
};

inline Result Hlab(std::vector<std::string> args) {
  std::ostringstream out, err;
  Result r;
  r.code = cli::RunCli(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

struct SweepOptions {
  bool longppl = true;            // record log_longppl evals
  bool runs = true;               // add the spec's runs
  bool leave_one_pending = true;  // gdn's first S4 run never runs
  // record appendix D.1's changes: full layers restricted +1 (log LongPPL)
  // and +0.01 (loss); efficient layers +0.1 and +0.001, null for Full
  bool receptive_field = false;
  // record a gradient profile (grad_reach 8, bins with G / G_base falling
  // from 16 to 1) for every run
  bool gradient_profile = false;
  // record layer probes (probe_acc 0.75 at layer 1 of 0..2) for every run
  bool probing = false;
  // record a retrieval-head trace for every run: the top head (layer 1,
  // head 0) scores min(1, (D/N) / 8)
  bool retrieval_heads = false;
  // with retrieval_heads, also trace every run along training
  // (evaluation.trajectory): scores 0.1, 0.2, 0.55, 0.8 at steps 2, 4, 6, 8
  // before the final one at step 10
  bool retrieval_trajectory = false;
  // record the Q-gradient hook's metrics for every run: q_grad_norm_l1h0 =
  // 1, 2, 3 at steps 1, 2, 3 (tokens 100 each), and l1h1 = 10 at step 1
  bool q_grad = false;
  // record the multiple-choice task "arc" for every run: at step 10
  // mc_acc = min(1, (D/N) / 16) and mc_acc_norm = that + 0.05, n 200, 5
  // examples; and an older step-5 evaluation of 0 that the report skips
  bool multiple_choice = false;
  // record RULER scores for every run: ruler_score/vt = min(1, (D/N) / 16)
  // and ruler_score/niah_single_1 = 1 at step 10 (an older step-5 score of
  // 0 for each, which the report must not take), ruler_score their mean
  bool ruler = false;
};

// Stores the demo sweep in `store`; every run (but, by default, gdn's
// first S4 run, whose id goes to *pending_run) succeeded with a val_loss
// and train_loss metric, a log_longppl eval, and, for `full`, a NIAH
// accuracy.
inline int64_t StoreDemoSweep(store::Store& store, const SweepOptions& options,
                              std::string* pending_run = nullptr) {
  auto spec =
      sweep::LoadSweepSpec(HLAB_SOURCE_DIR "/examples/sweeps/demo.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto plan = sweep::PlanSweep(*spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  store::SweepSpec stored;
  stored.name = plan->spec.name();
  stored.spec_hash = plan->spec_hash;
  stored.spec = sweep::SweepSpecToCanonicalJson(plan->spec);
  auto created = store.CreateSweep(stored, Now());
  EXPECT_TRUE(created.ok()) << created.status();
  const int64_t sweep_id = created->sweep_id;
  if (!options.runs) return sweep_id;
  std::vector<store::RunSpec> runs;
  for (const v1::Run& r : plan->runs) {
    store::RunSpec run;
    run.id = r.run_id();
    run.arch = r.architecture();
    run.scale = r.scale();
    run.budget_tokens = r.tokens();
    run.n_params = r.non_embedding_params();
    run.seed = r.seed();
    run.config = r.config_json();
    runs.push_back(run);
  }
  EXPECT_TRUE(store.AddRuns(sweep_id, runs, Now()).ok());
  bool left_pending = false;
  for (const store::RunSpec& run : runs) {
    if (options.leave_one_pending && !left_pending && run.arch == "gdn" &&
        run.scale == "S4") {
      left_pending = true;
      if (pending_run != nullptr) *pending_run = run.id;
      continue;
    }
    store::TaskSpec task;
    task.id = run.id + ".train";
    task.sweep_id = sweep_id;
    task.run_id = run.id;
    EXPECT_TRUE(store.AddTasks({task}, Now()).ok());
    auto attempt = store.LeaseTask(task.id, "w1", Now(), absl::Seconds(30));
    EXPECT_TRUE(attempt.ok()) << attempt.status();
    const double n = static_cast<double>(run.n_params);
    const double d = static_cast<double>(run.budget_tokens);
    store::MetricPoint loss;
    loss.name = "val_loss";
    loss.step = 10;
    loss.tokens = run.budget_tokens;
    loss.value = LossLaw(run.arch)(n, d);
    store::MetricPoint train = loss;
    train.name = "train_loss";
    train.value = loss.value + 0.5;
    EXPECT_TRUE(
        store.RecordMetrics(task.id, *attempt, {loss, train}, absl::UnixEpoch())
            .ok());
    if (options.q_grad) {
      std::vector<store::MetricPoint> norms;
      for (int64_t step = 1; step <= 3; ++step) {
        store::MetricPoint p;
        p.name = "q_grad_norm_l1h0";
        p.step = step;
        p.tokens = 100 * step;
        p.value = static_cast<double>(step);
        norms.push_back(p);
      }
      store::MetricPoint other = norms[0];
      other.name = "q_grad_norm_l1h1";
      other.value = 10;
      norms.push_back(other);
      EXPECT_TRUE(
          store.RecordMetrics(task.id, *attempt, norms, absl::UnixEpoch())
              .ok());
    }
    if (options.longppl) {
      store::EvalResult eval;
      eval.run_id = run.id;
      eval.step = 10;
      eval.metric = "log_longppl";
      eval.value = LongPplLaw(run.arch)(n, d);
      EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
    }
    if (options.receptive_field) {
      const bool full = run.arch == "full";
      const std::pair<const char*, std::optional<double>> rf[] = {
          {"rf_full_delta_log_longppl", 1.0},
          {"rf_full_delta_val_loss", 0.01},
          {"rf_efficient_delta_log_longppl",
           full ? std::nullopt : std::optional<double>(0.1)},
          {"rf_efficient_delta_val_loss",
           full ? std::nullopt : std::optional<double>(0.001)}};
      for (const auto& [metric, value] : rf) {
        store::EvalResult eval;
        eval.run_id = run.id;
        eval.step = 10;
        eval.metric = metric;
        eval.value = value ? *value : std::numeric_limits<double>::quiet_NaN();
        EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
      }
    }
    if (options.gradient_profile) {
      store::EvalResult eval;
      eval.run_id = run.id;
      eval.step = 10;
      eval.metric = "grad_reach";
      eval.value = 8;
      eval.details = R"({"bins": [{"from": 0, "to": 1, "g": 16, "ratio": 16},
        {"from": 1, "to": 2, "g": 8, "ratio": 8},
        {"from": 2, "to": 4, "g": 4, "ratio": 4},
        {"from": 4, "to": 8, "g": 2, "ratio": 2},
        {"from": 8, "to": 16, "g": 1, "ratio": 1}], "baseline": 1})";
      EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
    }
    if (options.retrieval_heads) {
      store::EvalResult eval;
      eval.run_id = run.id;
      eval.step = 10;
      eval.metric = "retrieval_score";
      eval.value = std::min(1.0, static_cast<double>(run.budget_tokens) /
                                     static_cast<double>(run.n_params) / 8.0);
      eval.details =
          absl::StrCat(R"({"top": [{"layer": 1, "head": 0, "score": )",
                       eval.value, R"(}], "heads": []})");
      EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
      const std::pair<int64_t, double> along[] = {
          {2, 0.1}, {4, 0.2}, {6, 0.55}, {8, 0.8}};
      for (const auto& [step, score] : along) {
        if (!options.retrieval_trajectory) break;
        store::EvalResult point = eval;
        point.step = step;
        point.value = score;
        // An older trace's top head: the figure takes the newest's.
        point.details = R"({"top": [{"layer": 1, "head": 1}], "heads": []})";
        EXPECT_TRUE(store.RecordEval(task.id, *attempt, point).ok());
      }
    }
    if (options.multiple_choice) {
      const double acc =
          std::min(1.0, static_cast<double>(run.budget_tokens) /
                            static_cast<double>(run.n_params) / 16.0);
      for (const int64_t step : {5, 10}) {
        for (const bool norm : {false, true}) {
          store::EvalResult eval;
          eval.run_id = run.id;
          eval.step = step;
          eval.metric = norm ? "mc_acc_norm/arc" : "mc_acc/arc";
          eval.value = step == 5 ? 0 : acc + (norm ? 0.05 : 0);
          eval.details = absl::StrCat(
              R"({"n": 200, "num_fewshot": 5, "acc_stderr": 0.03,)",
              R"( "acc_norm_stderr": 0.02})");
          EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
        }
      }
    }
    if (options.ruler) {
      const double vt =
          std::min(1.0, static_cast<double>(run.budget_tokens) /
                            static_cast<double>(run.n_params) / 16.0);
      for (const auto& [metric, value] :
           std::vector<std::pair<std::string, double>>{
               {"ruler_score/vt", vt},
               {"ruler_score/niah_single_1", 1.0},
               {"ruler_score", (vt + 1.0) / 2}}) {
        store::EvalResult eval;
        eval.run_id = run.id;
        eval.metric = metric;
        eval.step = 5;
        eval.value = 0;
        EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
        eval.step = 10;
        eval.value = value;
        EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
      }
    }
    if (options.probing) {
      store::EvalResult eval;
      eval.run_id = run.id;
      eval.step = 10;
      eval.metric = "probe_acc";
      eval.value = 0.75;
      eval.details = R"({"layers": [
        {"layer": 0, "mixer": "embedding", "accuracy": 0.125, "lo": 0.0625,
         "hi": 0.25},
        {"layer": 1, "mixer": "full", "accuracy": 0.75, "lo": 0.625, "hi": 0.875},
        {"layer": 2, "mixer": "full", "accuracy": 0.5, "lo": 0.375, "hi": 0.625}],
        "peak_layer": 1, "chance": 0.125})";
      EXPECT_TRUE(store.RecordEval(task.id, *attempt, eval).ok());
    }
    if (run.arch == "full") {
      store::EvalResult niah;
      niah.run_id = run.id;
      niah.step = 10;
      niah.metric = "niah_acc";
      niah.value = 0.25;
      EXPECT_TRUE(store.RecordEval(task.id, *attempt, niah).ok());
    }
    EXPECT_TRUE(store.CompleteTask(task.id, *attempt, Now()).ok());
  }
  return sweep_id;
}

// Stores each architecture's true law as its fit of `target`, with CIs
// of +-1% (gdn's A without an upper bound) and a warning in the details.
inline void StoreTrueFits(store::Store& store, int64_t sweep_id,
                          const std::string& target) {
  for (const std::string arch : {"full", "swa-16", "swa-64", "gdn"}) {
    const Law law = target == "loss" ? LossLaw(arch) : LongPplLaw(arch);
    store::FitRecord fit;
    fit.sweep_id = sweep_id;
    fit.arch = arch;
    fit.target = target;
    fit.e = law.E;
    fit.a = law.A;
    fit.alpha = law.alpha;
    fit.b = law.B;
    fit.beta = law.beta;
    nlohmann::json ci;
    for (const auto& [name, v] :
         std::map<std::string, double>{{"E", law.E},
                                       {"A", law.A},
                                       {"alpha", law.alpha},
                                       {"B", law.B},
                                       {"beta", law.beta}}) {
      ci[name] = {v * 0.99, v * 1.01};
    }
    // A resample that ran off to infinity: the coordinator stores null.
    if (arch == "gdn") ci["A"][1] = nullptr;
    ci["resamples"] = 50;
    ci["confidence"] = 0.95;
    fit.ci = ci.dump();
    fit.r2_fit = 1;
    fit.r2_verify = 0.999;
    fit.n_points = 9;
    fit.details =
        nlohmann::json{
            {"objective", 1e-12},
            {"r2_fit", 1.0},
            {"r2_verify", 0.999},
            {"n_points", 9},
            {"n_verify_points", 3},
            {"warnings", nlohmann::json::array({"warning of " + arch})},
            {"notes", nlohmann::json::array({"note of " + arch})}}
            .dump();
    ASSERT_TRUE(store.RecordFit(fit, Now()).ok());
  }
}

}  // namespace hlab::report::testing

#endif  // HLAB_TESTS_REPORT_REPORT_TEST_UTIL_H_
