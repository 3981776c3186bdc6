// CUDA pieces of hlab-train, kept in one place (train/cuda_backend.cc): the
// device list of --probe-devices, the device check for `"device": "cuda"`
// and the NCCL process group. Only a
// build against a CUDA LibTorch (CMake defines HLAB_WITH_CUDA) has them; the
// CPU build compiles the same interface and answers that it has no CUDA.
//
// Thread-safety: plain functions; the returned AllReduce is called from the
// one training thread.
//
//   HLAB_RETURN_IF_ERROR(CheckCudaTraining());
//   torch::Device device = CudaDeviceForRank(rank);
//   HLAB_ASSIGN_OR_RETURN(AllReduce sum, ConnectNccl(store, rank, world, t));
//   sum(tensors);  // in place, on the CUDA device
#ifndef HLAB_TRAIN_INTERNAL_CUDA_BACKEND_H_
#define HLAB_TRAIN_INTERNAL_CUDA_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hlab::train::internal {

// Whether this hlab-train was built against a CUDA LibTorch.
bool BuiltWithCuda();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int64_t memory_bytes = 0;
};
// The visible CUDA devices (none on a CPU-only build or without a driver).
std::vector<CudaDeviceInfo> ListCudaDevices();

// OK when this process can train on CUDA. FailedPrecondition naming the
// task's `device` field otherwise: a CPU-only build, or no visible GPU.
absl::Status CheckCudaTraining();

// The CUDA device of data-parallel rank `rank`: the worker gives each rank
// one GPU (CUDA_VISIBLE_DEVICES), so device 0; with several visible, rank
// modulo their count. Also makes it the current device.
torch::Device CudaDeviceForRank(int rank);

// Device memory in use on the current CUDA device (total - free, every
// process's), in bytes; -1 on a build without CUDA.
int64_t CudaMemoryUsedBytes();

// Sums tensors in place across the ranks.
using AllReduce = std::function<void(std::vector<torch::Tensor>&)>;

// An NCCL process group over `store`. Unavailable when NCCL cannot start;
// FailedPrecondition on a build without CUDA.
absl::StatusOr<AllReduce> ConnectNccl(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    std::chrono::milliseconds timeout);

}  // namespace hlab::train::internal

#endif  // HLAB_TRAIN_INTERNAL_CUDA_BACKEND_H_
