#include "cli/progress_view.h"

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

constexpr int kBarWidth = 20;

std::string ClockTime(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return absl::StrFormat("%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string Bar(double fraction) {
  const int filled =
      static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kBarWidth + 1e-9);
  return absl::StrCat("[", std::string(filled, '#'),
                      std::string(kBarWidth - filled, '.'), "]");
}

std::string KindName(v1::EventKind kind) {
  std::string name = absl::AsciiStrToLower(v1::EventKind_Name(kind));
  for (char& ch : name) {
    if (ch == '_') ch = ' ';
  }
  return name;
}

// The phase of a run whose coordinator sends none (older than phases):
// what its state says.
v1::RunPhase PhaseOfState(v1::RunState state) {
  switch (state) {
    case v1::RUN_STATE_PENDING:
      return v1::RUN_PHASE_WAITING;
    case v1::RUN_STATE_RUNNING:
      return v1::RUN_PHASE_TRAINING;
    case v1::RUN_STATE_SUCCEEDED:
      return v1::RUN_PHASE_SUCCEEDED;
    case v1::RUN_STATE_FAILED:
      return v1::RUN_PHASE_FAILED;
    case v1::RUN_STATE_CANCELLED:
      return v1::RUN_PHASE_CANCELLED;
    case v1::RUN_STATE_PREDICTED:
      return v1::RUN_PHASE_PREDICTED;
    default:
      return v1::RUN_PHASE_UNSPECIFIED;
  }
}

}  // namespace

ProgressView::ProgressView(const v1::Sweep& sweep,
                           const std::vector<v1::Run>& runs)
    : sweep_(sweep) {
  for (const v1::Run& run : runs) {
    RunView& view = runs_[run.run_id()];
    view.architecture = run.architecture();
    view.scale = run.scale();
    view.state = run.state();
    view.phase = run.phase() != v1::RUN_PHASE_UNSPECIFIED
                     ? run.phase()
                     : PhaseOfState(run.state());
    view.budget = run.tokens();
    view.tokens = run.tokens_done();
    view.step = run.steps_done();
    if (run.has_final_loss()) {
      view.loss = run.final_loss();
      view.has_loss = true;
    }
    order_.push_back(run.run_id());
  }
  SetPredictions(runs);
}

void ProgressView::SetPredictions(const std::vector<v1::Run>& runs) {
  for (const v1::Run& run : runs) {
    auto it = runs_.find(run.run_id());
    if (it == runs_.end()) continue;
    const v1::RunPrediction* p = FindPrediction(run, "loss");
    it->second.predicted = p != nullptr ? PredictionText(*p) : "";
    const v1::RunPrediction* c = FindPrediction(run, "train_loss");
    it->second.curve = c != nullptr ? PredictionText(*c) : "";
  }
}

bool ProgressView::IsActive(v1::RunPhase phase) {
  return phase == v1::RUN_PHASE_TRUNK || phase == v1::RUN_PHASE_TRAINING ||
         phase == v1::RUN_PHASE_DECAYING || phase == v1::RUN_PHASE_EVALUATING;
}

void ProgressView::Apply(const v1::Event& event) {
  last_sequence_ = std::max(last_sequence_, event.sequence());
  if (event.kind() == v1::SWEEP_FINISHED) finished_ = true;
  if (event.run_id().empty()) return;
  auto [it, inserted] = runs_.try_emplace(event.run_id());
  if (inserted) order_.push_back(event.run_id());
  RunView& run = it->second;
  switch (event.kind()) {
    case v1::RUN_STATE_CHANGED: {
      run.state = event.run_state();
      // The end states, and PENDING after a resume, are phases too; the
      // others come with RUN_PROGRESS.
      const v1::RunPhase phase = PhaseOfState(event.run_state());
      if (phase != v1::RUN_PHASE_TRAINING) run.phase = phase;
      break;
    }
    case v1::RUN_PROGRESS: {
      // A new phase starts a new rate: a decay runs at its own speed, after
      // a wait for a worker.
      const v1::RunPhase phase = event.run_phase() != v1::RUN_PHASE_UNSPECIFIED
                                     ? event.run_phase()
                                     : PhaseOfState(v1::RUN_STATE_RUNNING);
      if (phase != run.phase) run.has_sample = false;
      run.phase = phase;
      run.tokens = event.tokens();
      run.step = event.step();
      if (event.step() > 0) {
        run.loss = event.loss();
        run.has_loss = true;
      }
      if (!run.has_sample || event.tokens() < run.first_tokens) {
        // First sample of this phase, or a restart from an earlier
        // checkpoint.
        run.first_ms = event.time_unix_ms();
        run.first_tokens = event.tokens();
        run.has_sample = true;
      }
      run.last_ms = event.time_unix_ms();
      break;
    }
    default:
      break;
  }
}

std::string ProgressView::RunLabel(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.architecture.empty()) return run_id;
  return absl::StrCat(run_id, " ", it->second.architecture, "/",
                      it->second.scale);
}

std::string ProgressView::ProgressText(const RunView& run) const {
  std::string text;
  if (run.budget > 0) {
    const double fraction =
        static_cast<double>(run.tokens) / static_cast<double>(run.budget);
    absl::StrAppend(&text, absl::StrFormat("%3.0f%% ", 100 * fraction),
                    HumanCount(static_cast<double>(run.tokens)), "/",
                    HumanCount(static_cast<double>(run.budget)), " tokens");
  } else {
    absl::StrAppend(&text, HumanCount(static_cast<double>(run.tokens)),
                    " tokens");
  }
  if (run.has_loss)
    absl::StrAppend(&text, absl::StrFormat("  loss %.4f", run.loss));
  absl::StrAppend(&text, "  step ", run.step);
  const double seconds = static_cast<double>(run.last_ms - run.first_ms) / 1000;
  const double rate =
      seconds > 0 ? static_cast<double>(run.tokens - run.first_tokens) / seconds
                  : 0;
  const bool training = run.phase == v1::RUN_PHASE_TRUNK ||
                        run.phase == v1::RUN_PHASE_TRAINING ||
                        run.phase == v1::RUN_PHASE_DECAYING;
  if (training && rate > 0 && run.budget > run.tokens) {
    absl::StrAppend(
        &text, "  eta ",
        HumanDuration(static_cast<double>(run.budget - run.tokens) / rate));
  }
  if (!run.predicted.empty()) {
    absl::StrAppend(&text, "  predicted final ", run.predicted);
  }
  if (!run.curve.empty()) {
    absl::StrAppend(&text, "  its curve: final train loss ", run.curve);
  }
  return text;
}

std::string ProgressView::EventLine(const v1::Event& event) const {
  std::string line = absl::StrCat(ClockTime(event.time_unix_ms()), " #",
                                  event.sequence(), " ");
  switch (event.kind()) {
    case v1::RUN_PROGRESS: {
      auto it = runs_.find(event.run_id());
      absl::StrAppend(&line, "run ", RunLabel(event.run_id()));
      const std::string phase = RunPhaseName(event.run_phase());
      if (!phase.empty()) absl::StrAppend(&line, " ", phase);
      absl::StrAppend(&line, "  ",
                      it == runs_.end() ? "" : ProgressText(it->second));
      return line;
    }
    case v1::RUN_STATE_CHANGED:
      absl::StrAppend(&line, "run ", RunLabel(event.run_id()), " -> ",
                      RunStateName(event.run_state()));
      break;
    default:
      absl::StrAppend(&line, KindName(event.kind()));
      if (!event.run_id().empty()) {
        absl::StrAppend(&line, " run ", RunLabel(event.run_id()));
      }
      if (!event.task_id().empty())
        absl::StrAppend(&line, " ", event.task_id());
      if (!event.worker_id().empty()) {
        absl::StrAppend(&line, " worker ", event.worker_id());
      }
      break;
  }
  if (!event.message().empty()) absl::StrAppend(&line, ": ", event.message());
  return line;
}

bool ProgressView::IsNotable(const v1::Event& event) {
  return event.kind() != v1::RUN_PROGRESS;
}

std::vector<std::string> ProgressView::Block(int max_runs) const {
  std::map<v1::RunPhase, int> counts;
  for (const auto& [id, run] : runs_) ++counts[run.phase];
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "sweep %s \"%s\": %d/%d succeeded, %d on trunk, %d training, "
      "%d decaying, %d evaluating, %d waiting, %d failed, %d cancelled%s  "
      "(event #%d)",
      sweep_.sweep_id(), sweep_.name(), counts[v1::RUN_PHASE_SUCCEEDED],
      runs_.size(), counts[v1::RUN_PHASE_TRUNK], counts[v1::RUN_PHASE_TRAINING],
      counts[v1::RUN_PHASE_DECAYING], counts[v1::RUN_PHASE_EVALUATING],
      counts[v1::RUN_PHASE_WAITING], counts[v1::RUN_PHASE_FAILED],
      counts[v1::RUN_PHASE_CANCELLED],
      counts[v1::RUN_PHASE_PREDICTED] > 0
          ? absl::StrFormat(", %d predicted (stopped early)",
                            counts[v1::RUN_PHASE_PREDICTED])
          : std::string(),
      last_sequence_));
  int shown = 0;
  int hidden = 0;
  for (const std::string& id : order_) {
    const RunView& run = runs_.at(id);
    if (!IsActive(run.phase)) continue;
    if (shown >= max_runs) {
      ++hidden;
      continue;
    }
    ++shown;
    const double fraction = run.budget > 0 ? static_cast<double>(run.tokens) /
                                                 static_cast<double>(run.budget)
                                           : 0;
    lines.push_back(
        absl::StrCat("  ", RunLabel(id), " ",
                     absl::StrFormat("%-10s", RunPhaseName(run.phase)), " ",
                     Bar(fraction), " ", ProgressText(run)));
  }
  if (hidden > 0) lines.push_back(absl::StrCat("  ... and ", hidden, " more"));
  return lines;
}

}  // namespace hlab::cli
