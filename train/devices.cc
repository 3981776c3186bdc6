#include "train/devices.h"
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/str_format.h"
#include "train/internal/cuda_backend.h"

namespace hlab::train {

int64_t PhysicalMemoryBytes() {
  return static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) *
         ::sysconf(_SC_PAGE_SIZE);
}

std::string LogitsMemoryWarning(int64_t micro_batch_tokens, int64_t vocab_size,
                                int64_t memory_bytes) {
  // Logits, log-softmax and the gradients of both: a step at 8,192 tokens x
  // 128,256 ids peaked at 16.9 GB, 4.0 such copies (docs/performance.md).
  constexpr double kCopies = 4;
  const double bytes = kCopies * 4.0 * static_cast<double>(micro_batch_tokens) *
                       static_cast<double>(vocab_size);
  if (memory_bytes <= 0 || bytes <= 0.5 * static_cast<double>(memory_bytes)) {
    return "";
  }
  // The largest power-of-two micro-batch whose logits take a quarter.
  int64_t fits = micro_batch_tokens;
  while (fits > 1 && kCopies * 4.0 * static_cast<double>(fits) *
                             static_cast<double>(vocab_size) >
                         0.25 * static_cast<double>(memory_bytes)) {
    fits /= 2;
  }
  return absl::StrFormat(
      "the loss of %d tokens x %d ids takes ~%.1f GB (fp32 logits, their "
      "log-softmax and the gradients of both) on a machine with %.1f GB: set "
      "micro_batch_tokens to %d or less (a multiple of seq_len that divides "
      "batch_tokens; the step's gradient then accumulates over the "
      "micro-batches)",
      micro_batch_tokens, vocab_size, bytes / 1e9,
      static_cast<double>(memory_bytes) / 1e9, fits);
}

std::string ProbeDevicesJson() {
  nlohmann::json j;
  j["cpu"] = {{"cores", std::thread::hardware_concurrency()},
              {"memory_bytes", PhysicalMemoryBytes()}};
  nlohmann::json cuda = nlohmann::json::array();
  for (const internal::CudaDeviceInfo& d : internal::ListCudaDevices()) {
    cuda.push_back({{"index", d.index},
                    {"name", d.name},
                    {"memory_bytes", d.memory_bytes}});
  }
  j["cuda_build"] = internal::BuiltWithCuda();
  j["cuda"] = cuda;
  j["torch_version"] = TORCH_VERSION;
  return j.dump();
}

int DefaultIntraOpThreads(bool cuda, unsigned cores) {
  const int all = static_cast<int>(std::max(1u, cores));
  return cuda ? std::min(all, 4) : all;
}

int64_t CudaDeviceMemoryUsedBytes() { return internal::CudaMemoryUsedBytes(); }

}  // namespace hlab::train
