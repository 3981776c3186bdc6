#include "train/records.h"

#include <algorithm>
#include <cmath>

namespace hlab::train {

void RecordWriter::Emit(const nlohmann::json& record) {
  if (out_ == nullptr) return;
  // NaN/inf are not JSON: dump() writes null for them, which readers handle.
  const std::string line = record.dump();
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
  if (human_ == Human::kLines) PrintLine(record);
}

void RecordWriter::PrintLine(const nlohmann::json& r) {
  const std::string type = r.value("type", "");
  auto num = [&](const char* key) { return r.value(key, 0.0); };
  auto integer = [&](const char* key) {
    return static_cast<long long>(r.value(key, int64_t{0}));
  };
  if (type == "start") {
    std::fprintf(stderr,
                 "hlab-train: %s: %s, N = %lld non-embedding parameters, "
                 "budget %lld tokens, steps %lld -> %lld of %lld, %lld "
                 "threads\n",
                 r.value("name", "").c_str(), r.value("arch", "").c_str(),
                 integer("non_embedding_params"), integer("budget_tokens"),
                 integer("start_step"), integer("stop_step"),
                 integer("total_steps"), integer("threads"));
  } else if (type == "step") {
    std::fprintf(stderr,
                 "step %6lld  tokens %10lld  loss %7.4f  lr %.2e  grad %.3f  "
                 "%.0f tok/s\n",
                 integer("step"), integer("tokens"), num("loss"), num("lr"),
                 num("grad_norm"), num("tokens_per_s"));
  } else if (type == "eval") {
    std::fprintf(stderr,
                 "eval %6lld  tokens %10lld  held-out loss %.4f  recall-token "
                 "loss %.4f  (%lld sequences)\n",
                 integer("step"), integer("tokens"), num("val_loss"),
                 num("val_recall_loss"), integer("sequences"));
  } else if (type == "checkpoint") {
    std::fprintf(stderr, "checkpoint %s at step %lld: %s\n",
                 r.value("kind", "").c_str(), integer("step"),
                 r.value("path", "").c_str());
  } else if (type == "done") {
    std::fprintf(stderr, "done: step %lld, loss %.4f, %.1f s\n",
                 integer("step"), num("loss"), num("seconds"));
  } else if (type == "warning") {
    std::fprintf(stderr, "warning: %s\n", r.value("message", "").c_str());
  }
}

void RecordWriter::Progress(int64_t step, int64_t stop_step, int64_t tokens,
                            double loss, double tokens_per_s) {
  if (human_ != Human::kBar) return;
  constexpr int kWidth = 30;
  const double done =
      stop_step > 0 ? static_cast<double>(step) / static_cast<double>(stop_step)
                    : 1.0;
  const int filled = std::clamp(static_cast<int>(done * kWidth), 0, kWidth);
  const double eta = tokens_per_s > 0 && step > 0
                         ? (static_cast<double>(stop_step - step) *
                            (static_cast<double>(tokens) / step) / tokens_per_s)
                         : 0;
  std::fprintf(
      stderr, "\r[%s%s] step %lld/%lld  loss %.4f  %.0f tok/s  ETA %.0fs ",
      std::string(filled, '#').c_str(),
      std::string(kWidth - filled, '.').c_str(), static_cast<long long>(step),
      static_cast<long long>(stop_step), loss, tokens_per_s, eta);
  std::fflush(stderr);
  bar_drawn_ = true;
}

void RecordWriter::FinishProgress() {
  if (bar_drawn_) std::fputc('\n', stderr);
  bar_drawn_ = false;
}

}  // namespace hlab::train
