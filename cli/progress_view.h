// What `hlab watch` shows: the phase and progress of one sweep's runs,
// updated by the events of WatchSweep, drawn either as one line per event
// (logs, pipes) or as a block with one line per active run (a terminal).
// A run is active while it has a phase of its own (v1::RunPhase): its
// shared trunk trains, or its TRAIN, DECAY or EVAL task runs. Its line has
// a progress bar of the tokens of its own budget trained (on a trunk: the
// trunk's position up to the run's branch point, as the coordinator's
// RUN_PROGRESS events say), the loss, and an ETA from the rate between the
// first and the latest progress event seen since its phase began (event
// times, so a replay draws the same figures), the final loss its sweep's
// law predicts and, once it has trained a while, the final train loss its
// own curve predicts (the coordinator's live predictions, docs/
// coordinator.md; refreshed with SetPredictions when a PREDICTIONS_UPDATED
// event arrives). The header counts the runs by phase.
//
// Thread-compatible: one watcher thread owns it.
//
//   ProgressView view(sweep, runs);
//   for (const v1::Event& e : events) {
//     view.Apply(e);
//     out << view.EventLine(e) << "\n";      // plain mode
//   }
//   for (const std::string& line : view.Block()) out << line << "\n";
#ifndef HLAB_CLI_PROGRESS_VIEW_H_
#define HLAB_CLI_PROGRESS_VIEW_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hlab/v1/event.pb.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::cli {

class ProgressView {
 public:
  ProgressView(const v1::Sweep& sweep, const std::vector<v1::Run>& runs);

  void Apply(const v1::Event& event);

  // Takes the runs' live predictions of their final loss and train loss
  // (Run.predictions) from a fresh ListRuns.
  void SetPredictions(const std::vector<v1::Run>& runs);

  // One line for the event, e.g.
  // "18:02:11 #42 run 0123456789abcdef gdn/S1  42% 4.2M/10.0M tokens
  //  loss 3.214 eta 3m12s".
  std::string EventLine(const v1::Event& event) const;

  // Whether an event deserves a permanent line above the redrawn block on
  // a terminal (state changes, failures, workers, the end).
  static bool IsNotable(const v1::Event& event);

  // The redrawn block: a header with the sweep's runs by phase and one line
  // per active run (at most `max_runs`, then "... and N more"), e.g.
  // "sweep 7 "demo": 3/48 succeeded, 12 on trunk, 0 training, 2 decaying,
  //  1 evaluating, 30 waiting, 0 failed, 0 cancelled  (event #412)".
  std::vector<std::string> Block(int max_runs = 20) const;

  int64_t last_sequence() const { return last_sequence_; }
  // True after a SWEEP_FINISHED event, until Reopen(): the sweep ended,
  // or ended once and was resumed since (ask the coordinator).
  bool finished() const { return finished_; }
  void Reopen() { finished_ = false; }

 private:
  struct RunView {
    std::string architecture;
    std::string scale;
    v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
    v1::RunPhase phase = v1::RUN_PHASE_UNSPECIFIED;
    int64_t budget = 0;
    int64_t tokens = 0;
    int64_t step = 0;
    double loss = 0;
    bool has_loss = false;
    // The law's predicted final loss with its interval ("" without one),
    // and its own curve's predicted final train loss.
    std::string predicted;
    std::string curve;
    // First and latest progress samples of the current phase, for the rate.
    int64_t first_ms = 0;
    int64_t first_tokens = 0;
    int64_t last_ms = 0;
    bool has_sample = false;
  };

  static bool IsActive(v1::RunPhase phase);
  std::string RunLabel(const std::string& run_id) const;
  std::string ProgressText(const RunView& run) const;

  v1::Sweep sweep_;
  std::map<std::string, RunView> runs_;
  std::vector<std::string> order_;  // run ids, first seen first
  int64_t last_sequence_ = 0;
  bool finished_ = false;
};

}  // namespace hlab::cli

#endif  // HLAB_CLI_PROGRESS_VIEW_H_
