// Device discovery for `hlab-train --probe-devices`: what this build of
// hlab-train can train on, as JSON, so the worker daemon can advertise its
// devices without linking LibTorch.
//
//   {"cpu": {"cores": 16, "memory_bytes": 137438953472},
//    "cuda": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": ...}],
//    "torch_version": "1.13.1", "cuda_build": false}
//
// CUDA devices are listed only when hlab-train is built against a CUDA
// LibTorch (HLAB_WITH_CUDA); the CPU build always reports an empty list.
#ifndef HLAB_TRAIN_DEVICES_H_
#define HLAB_TRAIN_DEVICES_H_

#include <cstdint>
#include <string>

namespace hlab::train {

// The devices as a JSON object (one line).
std::string ProbeDevicesJson();

// The intra-op threads of a rank whose task sets none ("threads": 0):
// all `cores` on the CPU; on CUDA at most 4, since the GPU does the work and
// the host threads only launch kernels and prepare batches (several ranks
// share one host, and each spinning OpenMP thread takes a core from them).
int DefaultIntraOpThreads(bool cuda, unsigned cores);

// This machine's physical memory in bytes (sysconf).
int64_t PhysicalMemoryBytes();

// Device memory in use on the current CUDA device (total - free, as
// nvidia-smi counts it), in bytes; -1 on a build without CUDA.
int64_t CudaDeviceMemoryUsedBytes();

}  // namespace hlab::train

#endif  // HLAB_TRAIN_DEVICES_H_
