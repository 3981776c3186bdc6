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
}

void RecordWriter::Progress(int64_t step, int64_t stop_step, int64_t tokens,
                            double loss, double tokens_per_s) {
  if (!progress_bar_) return;
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
