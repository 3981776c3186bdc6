#include "coordinator/server/fit_scheduler.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/status_macros.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/server/adaptive_order.h"
#include "coordinator/server/early_stop.h"

namespace hlab::coordinator {

void FitScheduler::Start() {
  if (access(Binary().c_str(), X_OK) != 0) {
    HLAB_LOG(WARNING) << "automatic fits off: " << Binary()
                      << " is missing (build the hlab-sweep-fit target)";
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_.Start(options_.interval, [this] {
    if (options_.fit_finished) {
      absl::StatusOr<int> fitted = FitFinishedSweeps();
      if (!fitted.ok()) {
        HLAB_LOG(WARNING) << "automatic fits: " << fitted.status();
      }
    }
    if (options_.predict) {
      absl::StatusOr<int> predicted = PredictRunningSweeps();
      if (!predicted.ok()) {
        HLAB_LOG(WARNING) << "live predictions: " << predicted.status();
      }
    }
    absl::StatusOr<int> ordered = OrderAdaptiveSweeps();
    if (!ordered.ok()) {
      HLAB_LOG(WARNING) << "adaptive order: " << ordered.status();
    }
  });
}

void FitScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (child_ > 0) kill(child_, SIGTERM);  // a fit in progress ends now
  }
  thread_.Stop();
}

absl::StatusOr<bool> FitScheduler::AlreadyFitted(int64_t sweep_id) {
  store::QueryOptions options;
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      context_->query->Run(
          absl::StrCat(
              "SELECT (SELECT count(*) FROM fits WHERE sweep_id = ", sweep_id,
              ") + (SELECT count(*) FROM events WHERE sweep_id = ", sweep_id,
              " AND kind = 'fits')"),
          options));
  if (result.rows.empty()) return false;
  const auto* n = std::get_if<int64_t>(&result.rows[0][0]);
  return n != nullptr && *n > 0;
}

std::string FitScheduler::Binary() const {
  if (!options_.binary.empty()) return options_.binary;
  std::error_code ec;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "hlab-sweep-fit";
  return (self.parent_path() / "hlab-sweep-fit").string();
}

namespace {

// Runs `args` with stdout into a pipe (stderr, where Ceres and glog log,
// goes to the coordinator's own stderr); returns what it wrote.
// Internal if it cannot start or exits non-zero (with its output).
// `on_start` gets the child's pid once it runs.
absl::StatusOr<std::string> RunChild(
    const std::vector<std::string>& args,
    const std::function<void(pid_t)>& on_start) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  SpawnOptions options;
  options.Dup2(fds[1], STDOUT_FILENO);
  options.Close(fds[0]);
  options.reset_signal_mask = true;
  const absl::StatusOr<pid_t> spawned = SpawnProcess(args, options);
  close(fds[1]);
  if (!spawned.ok()) {
    close(fds[0]);
    return absl::InternalError(spawned.status().message());
  }
  const pid_t pid = *spawned;
  on_start(pid);
  std::string output;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(args[0], " failed (status ", status, "): ", output));
  }
  return output;
}

// A number field, or `missing` when absent or null (r2_verify is null
// without verification scales). value() would throw on a null.
double Number(const nlohmann::json& o, const char* key, double missing) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : missing;
}

std::string Text(const nlohmann::json& o, const char* key,
                 const std::string& missing) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : missing;
}

// A bound of a prediction: absent when null or missing (an open side).
std::optional<double> Bound(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

absl::StatusOr<nlohmann::json> FitScheduler::RunFitChild(int64_t sweep_id,
                                                         bool predict) {
  std::vector<std::string> args = {Binary(),
                                   "--db",
                                   context_->store->path(),
                                   "--sweep",
                                   absl::StrCat(sweep_id),
                                   "--bootstrap",
                                   absl::StrCat(options_.bootstrap),
                                   "--threads",
                                   absl::StrCat(options_.threads)};
  if (options_.quick_grid) args.push_back("--quick-grid");
  if (predict) args.push_back("--predict");
  absl::StatusOr<std::string> run = RunChild(args, [this](pid_t pid) {
    absl::MutexLock lock(&mu_);
    child_ = pid;
    if (stopping_) kill(pid, SIGTERM);
  });
  {
    absl::MutexLock lock(&mu_);
    child_ = 0;
    if (stopping_) return absl::CancelledError("the coordinator is stopping");
  }
  HLAB_ASSIGN_OR_RETURN(std::string output, std::move(run));
  // The JSON is the last line (glog or Ceres may log before it).
  while (!output.empty() && output.back() == '\n') output.pop_back();
  const size_t line_start = output.rfind('\n');
  const std::string last =
      line_start == std::string::npos ? output : output.substr(line_start + 1);
  nlohmann::json result = nlohmann::json::parse(last, nullptr, false);
  if (result.is_discarded() || !result.contains("fits")) {
    return absl::InternalError(
        absl::StrCat(args[0], " printed no result: ", output));
  }
  if (!result["fits"].is_array() ||
      (predict &&
       !(result.contains("predictions") && result["predictions"].is_array()))) {
    return absl::InternalError(
        absl::StrCat(args[0], " printed a malformed result: ", last));
  }
  return result;
}

absl::Status FitScheduler::RunSweepFit(int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(nlohmann::json result,
                        RunFitChild(sweep_id, /*predict=*/false));
  auto number = Number;
  auto text = Text;
  const double kNone = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::string> lines;
  int recorded = 0;
  for (const nlohmann::json& f : result["fits"]) {
    if (!f.is_object()) continue;
    lines.push_back(text(f, "line", ""));
    const auto fitted = f.find("fitted");
    if (fitted == f.end() || !fitted->is_boolean() || !fitted->get<bool>()) {
      HLAB_LOG(WARNING) << "sweep " << sweep_id << ": " << lines.back();
      continue;
    }
    const auto found = f.find("record");
    if (found == f.end() || !found->is_object()) continue;
    const nlohmann::json& r = *found;
    store::FitRecord record;
    record.sweep_id = sweep_id;
    record.arch = text(f, "arch", "");
    record.target = text(f, "target", "");
    record.e = number(r, "e", kNone);
    record.a = number(r, "a", kNone);
    record.alpha = number(r, "alpha", kNone);
    record.b = number(r, "b", kNone);
    record.beta = number(r, "beta", kNone);
    record.ci = text(r, "ci", "{}");
    record.r2_fit = number(r, "r2_fit", kNone);
    record.r2_verify = number(r, "r2_verify", kNone);  // stored as NULL
    record.n_points = static_cast<int>(number(r, "n_points", 0));
    record.details = text(r, "details", "{}");
    HLAB_RETURN_IF_ERROR(context_->store->RecordFit(record, context_->clock()));
    ++recorded;
  }
  const size_t total = result["fits"].size();
  store::Event event;
  event.sweep_id = sweep_id;
  event.kind = "fits";
  event.time = context_->clock();
  if (total == 0) {
    event.message = "no fits: the sweep has no succeeded runs";
  } else {
    event.message = absl::StrCat(
        recorded > 0 ? "fits ready" : "no fits", ": ", recorded, " of ", total,
        " stored in ", absl::StrFormat("%.1f", number(result, "seconds", 0)),
        " s\n", absl::StrJoin(lines, "\n"));
  }
  HLAB_RETURN_IF_ERROR(context_->store->AppendEvent(event).status());
  HLAB_LOG(INFO) << "sweep " << sweep_id << ": " << event.message;
  return absl::OkStatus();
}

absl::StatusOr<int> FitScheduler::FitFinishedSweeps() {
  absl::MutexLock lock(&round_mu_);
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps,
                        context_->store->ListSweeps());
  int handled = 0;
  for (const store::Sweep& sweep : sweeps) {
    if (done_.count(sweep.id) > 0) continue;
    if (sweep.state == store::SweepState::kCancelled) continue;
    HLAB_ASSIGN_OR_RETURN(bool finished, context_->catalog->Finished(sweep.id));
    if (!finished) continue;
    HLAB_ASSIGN_OR_RETURN(bool fitted, AlreadyFitted(sweep.id));
    if (!fitted) {
      store::RunFilter filter;
      filter.sweep_id = sweep.id;
      filter.state = store::RunState::kSucceeded;
      HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> succeeded,
                            context_->store->ListRuns(filter));
      if (succeeded.empty()) continue;  // all failed: maybe resumed later
      absl::Status fit = RunSweepFit(sweep.id);
      if (fit.code() == absl::StatusCode::kCancelled) return fit;
      if (!fit.ok()) {
        // Not retried every round (nor blocking other sweeps); a restarted
        // coordinator tries again.
        HLAB_LOG(WARNING) << "sweep " << sweep.id
                          << ": automatic fit failed: " << fit;
      } else {
        ++handled;
      }
    }
    done_.insert(sweep.id);
  }
  return handled;
}

absl::StatusOr<int> FitScheduler::SucceededRuns(int64_t sweep_id) {
  store::QueryOptions options;
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      context_->query->Run(
          absl::StrCat("SELECT count(*) FROM sweep_runs sr JOIN runs r ON"
                       " r.id = sr.run_id WHERE sr.sweep_id = ",
                       sweep_id, " AND r.state = 'SUCCEEDED'"),
          options));
  if (result.rows.empty()) return 0;
  const auto* n = std::get_if<int64_t>(&result.rows[0][0]);
  return n == nullptr ? 0 : static_cast<int>(*n);
}

absl::StatusOr<bool> FitScheduler::RunSweepPrediction(int64_t sweep_id,
                                                      int n_succeeded) {
  HLAB_ASSIGN_OR_RETURN(nlohmann::json result,
                        RunFitChild(sweep_id, /*predict=*/true));
  store::PredictionGeneration generation;
  generation.sweep_id = sweep_id;
  generation.n_succeeded = n_succeeded;
  // The laws this generation rests on (coefficients, or why not fitted).
  nlohmann::json laws = nlohmann::json::array();
  int fitted = 0;
  for (const nlohmann::json& f : result["fits"]) {
    if (!f.is_object()) continue;
    nlohmann::json law = {{"arch", Text(f, "arch", "")},
                          {"target", Text(f, "target", "")},
                          {"line", Text(f, "line", "")}};
    const auto record = f.find("record");
    if (record != f.end() && record->is_object()) {
      ++fitted;
      for (const char* key : {"e", "a", "alpha", "b", "beta", "n_points"}) {
        const auto v = record->find(key);
        if (v != record->end()) law[key] = *v;
      }
    }
    laws.push_back(std::move(law));
  }
  generation.laws = laws.dump();
  for (const nlohmann::json& p : result["predictions"]) {
    if (!p.is_object()) continue;
    store::Prediction prediction;
    prediction.run_id = Text(p, "run_id", "");
    prediction.target = Text(p, "target", "");
    prediction.predicted =
        Number(p, "predicted", std::numeric_limits<double>::quiet_NaN());
    prediction.lower = Bound(p, "lower");
    prediction.upper = Bound(p, "upper");
    prediction.method = Text(p, "method", "fit");
    prediction.n_points = static_cast<int>(Number(p, "n_points", 0));
    generation.predictions.push_back(std::move(prediction));
  }
  if (fitted == 0 && generation.predictions.empty()) {
    // Nothing to predict from yet (too few points): no generation.
    HLAB_LOG(INFO) << "sweep " << sweep_id << ": no live predictions yet ("
                   << n_succeeded << " succeeded runs): "
                   << (laws.empty() ? std::string("no law")
                                    : Text(laws[0], "line", ""));
    return false;
  }
  HLAB_ASSIGN_OR_RETURN(int64_t number, context_->store->RecordPredictions(
                                            generation, context_->clock()));
  store::Event event;
  event.sweep_id = sweep_id;
  event.kind = "predictions";
  event.time = context_->clock();
  event.message = absl::StrFormat(
      "generation %d from %d succeeded runs: %d predictions of unfinished "
      "runs in %.1f s",
      number, n_succeeded, generation.predictions.size(),
      Number(result, "seconds", 0));
  HLAB_RETURN_IF_ERROR(context_->store->AppendEvent(event).status());
  HLAB_LOG(INFO) << "sweep " << sweep_id << ": " << event.message;
  // Early stop (opt in): runs this generation already knows well enough.
  HLAB_RETURN_IF_ERROR(StopRunsPredictedWell(*context_, sweep_id).status());
  return true;
}

absl::StatusOr<int> FitScheduler::PredictRunningSweeps() {
  absl::MutexLock lock(&round_mu_);
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps,
                        context_->store->ListSweeps());
  int predicted = 0;
  const absl::Time now = context_->clock();
  for (const store::Sweep& sweep : sweeps) {
    if (sweep.state == store::SweepState::kCancelled) continue;
    HLAB_ASSIGN_OR_RETURN(bool finished, context_->catalog->Finished(sweep.id));
    if (finished) continue;
    HLAB_ASSIGN_OR_RETURN(int n_succeeded, SucceededRuns(sweep.id));
    auto tried = predicted_at_.find(sweep.id);
    if (tried == predicted_at_.end()) {
      // After a restart: the stored generation, if any.
      HLAB_ASSIGN_OR_RETURN(std::optional<store::PredictionGeneration> latest,
                            context_->store->LatestPredictions(sweep.id));
      Refit last;
      if (latest) last = {latest->n_succeeded, latest->created_at};
      tried = predicted_at_.emplace(sweep.id, last).first;
      // Early stop on the stored generation too: a coordinator stopped
      // between storing a generation and acting on it acts now.
      if (latest) {
        HLAB_RETURN_IF_ERROR(
            StopRunsPredictedWell(*context_, sweep.id).status());
      }
    }
    // The laws: when a run finished since. The runs' own curves: when one
    // of them trains and the last refit is curve_refresh old.
    absl::Duration rest = absl::ZeroDuration();
    if (options_.predict_busy_fraction > 0 &&
        options_.predict_busy_fraction < 1) {
      rest = tried->second.took * (1 / options_.predict_busy_fraction - 1);
    }
    if (now - tried->second.time < rest) continue;
    const bool law_due = n_succeeded >= kMinPredictionRuns &&
                         n_succeeded != tried->second.n_succeeded;
    bool curve_due = false;
    if (!law_due && options_.curve_refresh > absl::ZeroDuration() &&
        now - tried->second.time >= options_.curve_refresh) {
      store::RunFilter training;
      training.sweep_id = sweep.id;
      training.phases = {store::RunPhase::kTrunk, store::RunPhase::kTraining,
                         store::RunPhase::kDecaying};
      HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs,
                            context_->store->ListRuns(training));
      curve_due = !runs.empty();
    }
    if (!law_due && !curve_due) continue;
    const absl::Time started = context_->clock();
    absl::StatusOr<bool> done = RunSweepPrediction(sweep.id, n_succeeded);
    if (done.status().code() == absl::StatusCode::kCancelled) {
      return done.status();
    }
    // A failure is not retried until another run finishes (or, for the
    // curves, curve_refresh later).
    tried->second = {n_succeeded, now, context_->clock() - started};
    if (!done.ok()) {
      HLAB_LOG(WARNING) << "sweep " << sweep.id
                        << ": live predictions failed: " << done.status();
    } else if (*done) {
      ++predicted;
    }
  }
  return predicted;
}

absl::StatusOr<int> FitScheduler::OrderAdaptiveSweeps() {
  absl::MutexLock lock(&round_mu_);
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps,
                        context_->store->ListSweeps());
  int ordered = 0;
  for (const store::Sweep& sweep : sweeps) {
    if (sweep.state == store::SweepState::kCancelled) continue;
    absl::StatusOr<std::shared_ptr<const sweep::SweepPlan>> plan =
        context_->catalog->Plan(sweep.id);
    if (!plan.ok() || (*plan)->spec.schedule_policy() != "adaptive") continue;
    HLAB_ASSIGN_OR_RETURN(bool finished, context_->catalog->Finished(sweep.id));
    if (finished) continue;
    HLAB_ASSIGN_OR_RETURN(int n_succeeded, SucceededRuns(sweep.id));
    // The newest generation, and the sweep's pending training tasks without
    // a place (requeued after a lost lease, resumed, or added since).
    store::QueryOptions options;
    HLAB_ASSIGN_OR_RETURN(
        store::QueryResult result,
        context_->query->Run(
            absl::StrCat(
                "SELECT (SELECT coalesce(max(generation), 0) FROM "
                "prediction_generations WHERE sweep_id = ",
                sweep.id,
                "), (SELECT count(*) FROM tasks WHERE sweep_id = ", sweep.id,
                " AND state = 'PENDING' AND on_demand = 0 AND kind IN "
                "('TRAIN', 'DECAY') AND order_key IS NULL)"),
            options));
    int64_t generation = 0, unranked = 0;
    if (!result.rows.empty()) {
      if (const auto* g = std::get_if<int64_t>(&result.rows[0][0])) {
        generation = *g;
      }
      if (const auto* u = std::get_if<int64_t>(&result.rows[0][1])) {
        unranked = *u;
      }
    }
    const std::pair<int, int64_t> now{n_succeeded, generation};
    auto last = ordered_at_.find(sweep.id);
    if (last != ordered_at_.end() && last->second == now && unranked == 0) {
      continue;
    }
    HLAB_RETURN_IF_ERROR(OrderAdaptiveSweep(*context_, sweep.id).status());
    ordered_at_[sweep.id] = now;
    ++ordered;
  }
  return ordered;
}

}  // namespace hlab::coordinator
