// The only file of hlab-train with CUDA-only code (see
// train/internal/cuda_backend.h).
#include "train/internal/cuda_backend.h"

#include <torch/cuda.h>

#include "absl/strings/str_cat.h"

#ifdef HLAB_WITH_CUDA
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <cuda_runtime_api.h>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace hlab::train::internal {

bool BuiltWithCuda() {
#ifdef HLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<CudaDeviceInfo> ListCudaDevices() {
  std::vector<CudaDeviceInfo> devices;
#ifdef HLAB_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp props;
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    devices.push_back(
        {i, props.name, static_cast<int64_t>(props.totalGlobalMem)});
  }
#endif
  return devices;
}

absl::Status CheckCudaTraining() {
  if (!BuiltWithCuda()) {
    return absl::FailedPreconditionError(
        "device: \"cuda\", but this hlab-train was built against a CPU-only "
        "LibTorch (no CUDA); use \"device\": \"cpu\", or build hlab against a "
        "CUDA LibTorch (docs/training.md)");
  }
  if (!torch::cuda::is_available() || torch::cuda::device_count() == 0) {
    return absl::FailedPreconditionError(
        "device: \"cuda\", but no CUDA device is visible to this process "
        "(check CUDA_VISIBLE_DEVICES and the driver)");
  }
  return absl::OkStatus();
}

torch::Device CudaDeviceForRank(int rank) {
  const int count = static_cast<int>(torch::cuda::device_count());
  const int index = count > 0 ? rank % count : 0;
#ifdef HLAB_WITH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

int64_t CudaMemoryUsedBytes() {
#ifdef HLAB_WITH_CUDA
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<int64_t>(total - free);
#else
  return -1;
#endif
}

absl::StatusOr<AllReduce> ConnectNccl(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    std::chrono::milliseconds timeout) {
#ifdef HLAB_WITH_CUDA
  try {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        store, rank, world_size, options);
    return AllReduce([group](std::vector<torch::Tensor>& tensors) {
      group->allreduce(tensors)->wait();
    });
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("NCCL process group for rank ",
                                               rank, " of ", world_size, ": ",
                                               e.what()));
  }
#else
  (void)store;
  (void)timeout;
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", rank, " of ", world_size,
      ": NCCL needs a CUDA build of hlab-train; this one is CPU-only"));
#endif
}

}  // namespace hlab::train::internal
