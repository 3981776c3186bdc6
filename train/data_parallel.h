// DataParallel: data-parallel training across processes with torch's c10d:
// Gloo on CPU, NCCL on CUDA (`cuda` in the config; needs a build against a
// CUDA LibTorch, train/internal/cuda_backend.h).
//
// Each rank runs the same task with its own --rank. Rendezvous goes through a
// c10d TCPStore that rank 0 hosts at (master_addr, master_port); the worker
// daemon picks a free port and starts the ranks:
//
//   hlab-train --task t.json --rank 0 --world-size 2 --master-port 29517 &
//   hlab-train --task t.json --rank 1 --world-size 2 --master-port 29517 &
//
// A step's micro-batches are split across ranks (rank r takes an equal,
// contiguous share), every rank scales its losses by the global number of
// micro-batches, and the gradients are summed across ranks: world size W
// computes the same update as one process accumulating all micro-batches, up
// to the summation order of the all-reduce.
//
// Not thread-safe; collectives must be called in the same order on every
// rank.
#ifndef HLAB_TRAIN_DATA_PARALLEL_H_
#define HLAB_TRAIN_DATA_PARALLEL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hlab::train {

struct DistributedConfig {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::seconds timeout{300};
  // NCCL with tensors on this rank's CUDA device, instead of Gloo on CPU.
  bool cuda = false;
};

// InvalidArgument naming the flag.
absl::Status ValidateDistributedConfig(const DistributedConfig& config);

class DataParallel {
 public:
  // Connects to the other ranks; Unavailable when the rendezvous times out,
  // FailedPrecondition for `cuda` on a build without CUDA.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Connect(
      const DistributedConfig& config);
  ~DataParallel();

  int rank() const { return config_.rank; }
  int world_size() const { return config_.world_size; }

  // Sums every parameter's gradient across ranks (one flat all-reduce, on
  // the parameters' device).
  void SumGradients(const std::vector<torch::Tensor>& parameters);
  // Sums small vectors of values (losses, flags) across ranks.
  std::vector<double> Sum(const std::vector<double>& values);

 private:
  struct Impl;
  DataParallel(const DistributedConfig& config, std::unique_ptr<Impl> impl);
  DistributedConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hlab::train

#endif  // HLAB_TRAIN_DATA_PARALLEL_H_
