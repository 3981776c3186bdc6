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

}  // namespace

ProgressView::ProgressView(const v1::Sweep& sweep,
                           const std::vector<v1::Run>& runs)
    : sweep_(sweep) {
  for (const v1::Run& run : runs) {
    RunView& view = runs_[run.run_id()];
    view.architecture = run.architecture();
    view.scale = run.scale();
    view.state = run.state();
    view.budget = run.tokens();
    view.tokens = run.tokens_done();
    order_.push_back(run.run_id());
  }
}

void ProgressView::Apply(const v1::Event& event) {
  last_sequence_ = std::max(last_sequence_, event.sequence());
  if (event.kind() == v1::SWEEP_FINISHED) finished_ = true;
  if (event.run_id().empty()) return;
  auto [it, inserted] = runs_.try_emplace(event.run_id());
  if (inserted) order_.push_back(event.run_id());
  RunView& run = it->second;
  switch (event.kind()) {
    case v1::RUN_STATE_CHANGED:
      run.state = event.run_state();
      break;
    case v1::RUN_PROGRESS:
      if (run.state != v1::RUN_STATE_RUNNING) run.state = v1::RUN_STATE_RUNNING;
      run.tokens = event.tokens();
      run.step = event.step();
      run.loss = event.loss();
      run.has_loss = true;
      if (!run.has_sample || event.tokens() < run.first_tokens) {
        // First sample, or a restart from an earlier checkpoint.
        run.first_ms = event.time_unix_ms();
        run.first_tokens = event.tokens();
        run.has_sample = true;
      }
      run.last_ms = event.time_unix_ms();
      break;
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
  if (rate > 0 && run.budget > run.tokens) {
    absl::StrAppend(
        &text, "  eta ",
        HumanDuration(static_cast<double>(run.budget - run.tokens) / rate));
  }
  return text;
}

std::string ProgressView::EventLine(const v1::Event& event) const {
  std::string line = absl::StrCat(ClockTime(event.time_unix_ms()), " #",
                                  event.sequence(), " ");
  switch (event.kind()) {
    case v1::RUN_PROGRESS: {
      auto it = runs_.find(event.run_id());
      absl::StrAppend(&line, "run ", RunLabel(event.run_id()), "  ",
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
  int counts[6] = {0, 0, 0, 0, 0, 0};
  for (const auto& [id, run] : runs_) {
    const int s = static_cast<int>(run.state);
    if (s >= 0 && s < 6) ++counts[s];
  }
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "sweep %s \"%s\": %d/%d succeeded, %d running, %d pending, %d failed, "
      "%d cancelled  (event #%d)",
      sweep_.sweep_id(), sweep_.name(), counts[v1::RUN_STATE_SUCCEEDED],
      runs_.size(), counts[v1::RUN_STATE_RUNNING],
      counts[v1::RUN_STATE_PENDING], counts[v1::RUN_STATE_FAILED],
      counts[v1::RUN_STATE_CANCELLED], last_sequence_));
  int shown = 0;
  int hidden = 0;
  for (const std::string& id : order_) {
    const RunView& run = runs_.at(id);
    if (run.state != v1::RUN_STATE_RUNNING) continue;
    if (shown >= max_runs) {
      ++hidden;
      continue;
    }
    ++shown;
    const double fraction = run.budget > 0 ? static_cast<double>(run.tokens) /
                                                 static_cast<double>(run.budget)
                                           : 0;
    lines.push_back(absl::StrCat("  ", RunLabel(id), " ", Bar(fraction), " ",
                                 ProgressText(run)));
  }
  if (hidden > 0) lines.push_back(absl::StrCat("  ... and ", hidden, " more"));
  return lines;
}

}  // namespace hlab::cli
