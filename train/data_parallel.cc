#include "train/data_parallel.h"

#ifndef HLAB_NO_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "train/internal/cuda_backend.h"

namespace hlab::train {

struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  // In place: Gloo's (CPU) or NCCL's allreduce; it holds its process group.
  internal::AllReduce sum;
  torch::Device device{torch::kCPU};
};

absl::Status ValidateDistributedConfig(const DistributedConfig& c) {
  if (c.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world-size: must be >= 1, got ", c.world_size));
  }
  if (c.rank < 0 || c.rank >= c.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank: must be in [0, world size ", c.world_size, "), got ", c.rank));
  }
  if (c.master_port < 1 || c.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--master-port: must be in [1, 65535], got ", c.master_port));
  }
  return absl::OkStatus();
}

DataParallel::DataParallel(const DistributedConfig& config,
                           std::unique_ptr<Impl> impl)
    : config_(config), impl_(std::move(impl)) {}

DataParallel::~DataParallel() = default;

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Connect(
    const DistributedConfig& config) {
  if (absl::Status s = ValidateDistributedConfig(config); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  if (config.cuda) {
    HLAB_RETURN_IF_ERROR(internal::CheckCudaTraining());
    impl->device = internal::CudaDeviceForRank(config.rank);
  }
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(config.master_port);
    options.isServer = config.rank == 0;
    options.numWorkers = static_cast<size_t>(config.world_size);
    options.waitWorkers = true;
    options.timeout = config.timeout;
    impl->store =
        c10::make_intrusive<c10d::TCPStore>(config.master_addr, options);
    if (!config.cuda) {
#ifdef HLAB_NO_GLOO
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", config.rank, " of ", config.world_size,
          ": CPU ranks need Gloo, and this hlab-train was built against a "
          "LibTorch without the Gloo headers; use one CPU rank, or build "
          "against a LibTorch with them (docs/training.md)"));
#else
      auto gloo = c10d::ProcessGroupGloo::Options::create(config.timeout);
      gloo->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(config.master_addr));
      auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
          impl->store, config.rank, config.world_size, gloo);
      impl->sum = [group](std::vector<torch::Tensor>& tensors) {
        group->allreduce(tensors)->wait();
      };
#endif
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous at ", config.master_addr, ":",
                     config.master_port, " failed for rank ", config.rank,
                     " of ", config.world_size, ": ", e.what()));
  }
  if (config.cuda) {
    HLAB_ASSIGN_OR_RETURN(
        impl->sum, internal::ConnectNccl(
                       impl->store, config.rank, config.world_size,
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           config.timeout)));
  }
  return std::unique_ptr<DataParallel>(
      new DataParallel(config, std::move(impl)));
}

void DataParallel::SumGradients(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& p : parameters) {
    flat.push_back(p.grad().defined() ? p.grad().reshape(-1)
                                      : torch::zeros({p.numel()}, p.options()));
  }
  std::vector<torch::Tensor> buffer = {torch::cat(flat)};
  impl_->sum(buffer);
  int64_t offset = 0;
  for (const torch::Tensor& p : parameters) {
    torch::Tensor slice =
        buffer[0].narrow(0, offset, p.numel()).view(p.sizes());
    if (p.grad().defined()) {
      p.mutable_grad().copy_(slice);
    } else {
      p.mutable_grad() = slice.clone();
    }
    offset += p.numel();
  }
}

std::vector<double> DataParallel::Sum(const std::vector<double>& values) {
  std::vector<torch::Tensor> buffer = {
      torch::tensor(values, torch::kFloat64).to(impl_->device)};
  impl_->sum(buffer);
  const torch::Tensor sums = buffer[0].cpu();
  const double* p = sums.data_ptr<double>();
  return std::vector<double>(p, p + values.size());
}

}  // namespace hlab::train
