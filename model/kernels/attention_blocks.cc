#include "model/kernels/attention_blocks.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace hlab::model::internal {

using torch::Tensor;

std::vector<QueryBlock> PlanBlocks(const Dims& dims, int64_t window,
                                   const AttentionBlocks& blocks,
                                   const torch::Device& device,
                                   bool with_masks) {
  TORCH_CHECK(blocks.query > 0 && blocks.key > 0,
              "attention: block sizes must be positive");
  std::map<std::tuple<int64_t, int64_t, int64_t>, Tensor> masks;
  const auto long_options =
      torch::TensorOptions().dtype(torch::kInt64).device(device);
  std::vector<QueryBlock> plan;
  for (int64_t i0 = 0; i0 < dims.t; i0 += blocks.query) {
    QueryBlock qb;
    qb.start = i0;
    qb.size = std::min(blocks.query, dims.t - i0);
    const int64_t last_query = i0 + qb.size - 1;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, i0 - window + 1) : 0;
    for (int64_t end = last_query + 1; end > lo; end -= blocks.key) {
      KeyBlock kb;
      kb.start = std::max(lo, end - blocks.key);
      kb.size = end - kb.start;
      const bool needs_mask =
          end - 1 > i0 || (window > 0 && kb.start <= last_query - window);
      if (needs_mask && with_masks) {
        // Masked iff delta = j - t > 0, or delta <= -window.
        const int64_t offset = kb.start - i0;
        Tensor& mask = masks[{offset, qb.size, kb.size}];
        if (!mask.defined()) {
          const Tensor rows =
              torch::arange(qb.size, long_options).repeat_interleave(dims.g);
          const Tensor delta =
              torch::arange(offset, offset + kb.size, long_options)
                  .unsqueeze(0) -
              rows.unsqueeze(1);
          mask = delta > 0;
          if (window > 0) mask.logical_or_(delta <= -window);
        }
        kb.mask = mask;
      }
      qb.keys.push_back(std::move(kb));
    }
    plan.push_back(std::move(qb));
  }
  return plan;
}

std::vector<WorkItem> ScheduleWork(const std::vector<QueryBlock>& plan,
                                   const Dims& dims, int64_t threads) {
  // A block pair's fixed cost (its GEMM calls, the row loops' set-up), in
  // keys.
  constexpr int64_t kBlockOverhead = 128;
  const int64_t blocks = std::max<int64_t>(1, plan.size());
  const int64_t slices =
      std::clamp<int64_t>((8 * threads + blocks - 1) / blocks, 1, dims.n());
  std::vector<WorkItem> items;
  for (const QueryBlock& query : plan) {
    int64_t keys = 0;
    for (const KeyBlock& key : query.keys) keys += key.size + kBlockOverhead;
    for (int64_t i = 0; i < slices; ++i) {
      WorkItem item;
      item.query = &query;
      item.n0 = dims.n() * i / slices;
      item.n = dims.n() * (i + 1) / slices - item.n0;
      item.cost = keys * query.size * item.n;
      items.push_back(item);
    }
  }
  std::stable_sort(
      items.begin(), items.end(),
      [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  return items;
}

int64_t BlockThreads(const torch::Device& device) {
  if (!device.is_cpu()) return 1;
  return at::in_parallel_region() ? 1 : std::max(1, at::get_num_threads());
}

int64_t WorkerCount(const std::vector<WorkItem>& items,
                    const torch::Device& device) {
  return std::max<int64_t>(
      1, std::min<int64_t>(BlockThreads(device),
                           static_cast<int64_t>(items.size())));
}

}  // namespace hlab::model::internal
