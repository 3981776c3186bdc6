#include "train/devices.h"
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "train/internal/cuda_backend.h"

namespace hlab::train {

int64_t PhysicalMemoryBytes() {
  return static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) *
         ::sysconf(_SC_PAGE_SIZE);
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
