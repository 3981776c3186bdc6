// RecordRelay: turns hlab-train's JSON-lines records into what the worker
// reports to the coordinator: metric points (batched), checkpoints, the
// progress carried by heartbeats, and the trainer's last error message.
//
// Records (train/records.h) and what they become:
//   step        points train_loss, lr, grad_norm, tokens_per_s at (step,
//               tokens); progress
//   eval        points val_loss, val_recall_loss at (step, tokens)
//   checkpoint  a Checkpoint (path, sha256, step, tokens, size; kind "branch"
//               sets branch_point and names the run it branches for; kind
//               "kept", evaluation.trajectory's, names the run whose
//               trajectory it is: a TRUNK's longest run)
//   error       last_error() (the Fail message) and its exit code
//   done        progress; start / warning: logged by the caller only
//   result      (hlab-eval) an eval result: results(), a MetricPoint with
//               name = the metric, its step (default the task's eval_step)
//               and details_json = the record's "details", sent with
//               Complete
//   progress    (hlab-eval) how far its current evaluation is: eval_done()
//               and eval_total() (not reported)
// Points name their run: a task's only run, or for a TRUNK every run whose
// trajectory contains that step (step <= the run's branch step), since the
// trunk's prefix is each of those runs' own curve. A TRUNK's "latest"
// checkpoints name no run (the store keys them by task).
//
// Points wait in an outbox until taken: FlushDue() says when a batch should
// go (kFlushPoints points, or the oldest waiting kFlushInterval); the caller
// sends PeekPoints(), then AckPoints() what the coordinator accepted, so a
// failed send is retried with the same points.
//
// Not thread-safe: the task's supervising thread owns it.
//
//   RecordRelay relay(task);
//   relay.Add(line, absl::Now());
//   if (relay.FlushDue(absl::Now())) {
//     auto batch = relay.PeekPoints(1000);
//     if (Send(batch).ok()) relay.AckPoints(batch.size());
//   }
#ifndef HLAB_WORKER_RECORD_RELAY_H_
#define HLAB_WORKER_RECORD_RELAY_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/task.pb.h"

namespace hlab::worker {

class RecordRelay {
 public:
  static constexpr size_t kFlushPoints = 200;
  static constexpr absl::Duration kFlushInterval = absl::Seconds(1);
  // Points kept while the coordinator is unreachable; older ones are dropped
  // (the store keeps what arrived; a replay after resume fills gaps).
  static constexpr size_t kMaxPendingPoints = 200000;

  explicit RecordRelay(const hlab::v1::Task& task);

  // Parses one record line. InvalidArgument for a line that is not a JSON
  // object with a "type" (the caller logs it; the relay is unchanged).
  absl::Status Add(absl::string_view line, absl::Time now);

  bool FlushDue(absl::Time now) const;
  bool HasPending() const { return !points_.empty() || !checkpoints_.empty(); }

  // Up to `max` of the oldest waiting points, in order.
  std::vector<hlab::v1::MetricPoint> PeekPoints(size_t max) const;
  // Drops the first `n` waiting points (sent).
  void AckPoints(size_t n);

  // Checkpoints in the order written; AckCheckpoint() drops the first.
  const std::deque<hlab::v1::Checkpoint>& checkpoints() const {
    return checkpoints_;
  }
  void AckCheckpoint() { checkpoints_.pop_front(); }

  // The latest step, tokens, loss and throughput (task id and attempt set).
  const hlab::v1::TaskProgress& progress() const { return progress_; }
  // The message and exit code of the last "error" record; empty / -1 when
  // none.
  const std::string& last_error() const { return last_error_; }
  int last_error_code() const { return last_error_code_; }
  bool done() const { return done_; }
  // EVAL results so far, in record order.
  const std::vector<hlab::v1::MetricPoint>& results() const { return results_; }
  int64_t eval_done() const { return eval_done_; }
  int64_t eval_total() const { return eval_total_; }

 private:
  void AddPoint(const std::string& name, int64_t step, int64_t tokens,
                double value, int64_t wall_ms);
  // Runs a point at `step` belongs to.
  std::vector<std::string> RunsAt(int64_t step) const;
  // The run a branch checkpoint at `step` (of budget `budget_tokens`) is for.
  std::string BranchRun(int64_t step) const;
  // The run a TRUNK trains the schedule of: its last branch point's.
  std::string LongestRun() const;

  hlab::v1::Task task_;
  std::deque<hlab::v1::MetricPoint> points_;
  absl::Time oldest_ = absl::InfiniteFuture();
  std::deque<hlab::v1::Checkpoint> checkpoints_;
  hlab::v1::TaskProgress progress_;
  std::string last_error_;
  int last_error_code_ = -1;
  bool done_ = false;
  size_t dropped_ = 0;
  std::vector<hlab::v1::MetricPoint> results_;
  int64_t eval_done_ = 0;
  int64_t eval_total_ = 0;
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_RECORD_RELAY_H_
