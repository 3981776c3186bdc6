#include "train/devices.h"
#include <unistd.h>

#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#ifdef HLAB_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace hlab::train {

std::string ProbeDevicesJson() {
  nlohmann::json j;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  j["cpu"] = {{"cores", std::thread::hardware_concurrency()},
              {"memory_bytes", static_cast<int64_t>(pages) * page_size}};
  nlohmann::json cuda = nlohmann::json::array();
#ifdef HLAB_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess) {
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp props;
      if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
      cuda.push_back(
          {{"index", i},
           {"name", props.name},
           {"memory_bytes", static_cast<int64_t>(props.totalGlobalMem)}});
    }
  }
  j["cuda_build"] = true;
#else
  j["cuda_build"] = false;
#endif
  j["cuda"] = cuda;
  j["torch_version"] = TORCH_VERSION;
  return j.dump();
}

}  // namespace hlab::train
