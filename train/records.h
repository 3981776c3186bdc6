// RecordWriter: the structured progress records hlab-train emits, one JSON
// object per line, for the worker daemon to relay to the coordinator.
//
// Record types (field "type"):
//   start       task name, model, N, budget, steps, start step, threads
//   step        step, tokens, loss, lr, grad_norm, tokens_per_s
//   eval        step, tokens, val_loss, val_recall_loss, sequences, tokens
//   analysis    step, tokens, q_grad_norm {"l<layer>h<head>": norm} (the
//               analysis.q_grad_every_steps hook: each full-attention
//               head's q_proj gradient norm before clipping)
//   checkpoint  step, tokens, kind ("latest" | "kept" | "branch"), path,
//               sha256, branch_budget_tokens
//   warning     message
//   done        step, tokens, final loss, seconds
//   error       exit_code, message
// Records go to stdout by default, or to a file descriptor the worker gives
// (--record-fd). Humans get stderr: a one-line progress bar when it is a
// terminal (kBar), or one plain line per step record, evaluation and
// checkpoint (kLines, `--progress`; for log files such as Slurm's). Neither
// ever goes to the record stream.
//
// Not thread-safe: the training loop owns it.
//
//   RecordWriter records(stdout, RecordWriter::Human::kBar);
//   records.Emit({{"type", "step"}, {"step", 10}, {"loss", 2.31}});
#ifndef HLAB_TRAIN_RECORDS_H_
#define HLAB_TRAIN_RECORDS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace hlab::train {

class RecordWriter {
 public:
  enum class Human { kNone, kBar, kLines };

  // `out` may be null (records dropped, e.g. in tests).
  RecordWriter(std::FILE* out, Human human) : out_(out), human_(human) {}

  // Writes one record and flushes, so the worker sees it at once.
  void Emit(const nlohmann::json& record);

  // Redraws the stderr progress bar (no-op without a terminal).
  void Progress(int64_t step, int64_t stop_step, int64_t tokens, double loss,
                double tokens_per_s);
  // Ends the progress bar line.
  void FinishProgress();

 private:
  void PrintLine(const nlohmann::json& record);

  std::FILE* out_;
  Human human_;
  bool bar_drawn_ = false;
};

}  // namespace hlab::train

#endif  // HLAB_TRAIN_RECORDS_H_
