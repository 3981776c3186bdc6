// The block plan and the work schedule of the blockwise attention kernel
// (model/kernels/attention_kernel.cc): which key blocks each query block
// visits, the masks they share, how the (query block, batch slice) items are
// dealt to the intra-op threads. Private to model/.
#ifndef HLAB_MODEL_KERNELS_ATTENTION_BLOCKS_H_
#define HLAB_MODEL_KERNELS_ATTENTION_BLOCKS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include <ATen/TensorIterator.h>
#include <ATen/ThreadLocalState.h>
#include <torch/torch.h>

#include "model/cpu/chunk_rows.h"
#include "model/kernels/attention_args.h"
#include "model/kernels/attention_kernel.h"

namespace hlab::model::internal {

// The visited block pairs. Each query block [start, start + size) visits the
// keys it can see, [lo, start + size), in key blocks taken backwards from the
// diagonal, so the diagonal block and the window-edge block have the same
// offset in every query block and share one cached mask.
struct KeyBlock {
  int64_t start = 0;
  int64_t size = 0;
  torch::Tensor
      mask;  // (size_q * G, size) bool, true = invisible; or undefined
};
struct QueryBlock {
  int64_t start = 0;
  int64_t size = 0;
  std::vector<KeyBlock> keys;
};

// The query blocks of a (T, window) pass with their key blocks, and their
// masks when `with_masks` (the ATen loops read them; the fused loops mask as
// they go, and building the masks, a few ATen ops each, was 5% of a
// micro-model's step: docs/performance.md, "Micro-model steps").
std::vector<QueryBlock> PlanBlocks(const Dims& dims, int64_t window,
                                   const AttentionBlocks& blocks,
                                   const torch::Device& device,
                                   bool with_masks = true);

// One unit of parallel work: query block `query` of batch matrices
// [n0, n0 + n).
struct WorkItem {
  const QueryBlock* query = nullptr;
  int64_t n0 = 0, n = 0;
  int64_t cost = 0;  // visited keys x matrices, for scheduling
};

// The work items, costliest first. Batch matrices are split into slices
// when there are fewer than 8 query blocks per thread: the items are dealt
// to the workers by estimated cost before any runs (ForEachItemInParallel),
// and a few large items balance badly.
std::vector<WorkItem> ScheduleWork(const std::vector<QueryBlock>& plan,
                                   const Dims& dims, int64_t threads);

// Threads for the block loop on `device`: the intra-op pool, or 1 inside a
// parallel region. 1 on any device but the CPU: there each op is a kernel
// launch on one stream, so splitting the items across host threads only
// multiplies the launches (and the backward's per-worker fp32 dK / dV
// accumulators: ~16 GB at T=16384 and 128 threads).
int64_t BlockThreads(const torch::Device& device);

// Workers for the items: the block-loop threads, but no more than items.
int64_t WorkerCount(const std::vector<WorkItem>& items,
                    const torch::Device& device);

// Runs fn(worker) once for each worker in [0, workers) on the intra-op
// threads, in one parallel region.
//
// at::parallel_for cannot be used for this here: it is a header template
// whose `#pragma omp parallel` is compiled into the caller, and hlab is not
// built with -fopenmp, so it would run serially. TensorIterator::for_each
// runs the same parallel loop compiled inside LibTorch; iterating over a
// tensor of worker ids with grain 1 gives one worker per thread.
template <typename Fn>
void RunOnWorkers(int64_t workers, const Fn& fn) {
  const torch::Tensor ids = at::arange(workers, torch::kInt64);
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_output(ids)
                                .resize_outputs(false)
                                .check_all_same_dtype(false)
                                .build();
  // Workers start with default thread-local state (grad mode on, autocast
  // off); give them the caller's.
  const at::ThreadLocalState caller_state;
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
        const at::ThreadLocalStateGuard state_guard(caller_state);
        for (int64_t j = 0; j < size1; ++j) {
          for (int64_t i = 0; i < size0; ++i) {
            fn(*reinterpret_cast<const int64_t*>(data[0] + i * strides[0] +
                                                 j * strides[1]));
          }
        }
      },
      /*grain_size=*/1);
}

// How ForEachItemInParallel hands items to workers.
enum class Deal {
  // Each worker takes the costliest remaining item from a shared queue: the
  // best balance, but which worker runs an item varies from run to run.
  kQueue,
  // The items (costliest first) are dealt out before any runs, each to the
  // worker with the least estimated cost so far, and every worker runs its
  // own in that order. For the backward: a worker's dK / dV accumulator
  // then sums the same items in the same order on every run. (With the
  // queue, dK and dV, and so every gradient below them, differed in the
  // last bits from run to run at a fixed thread count.)
  kFixed,
};

// Runs fn(item, worker) for every item on `threads` workers, dealt as
// `deal` says. Inside, ATen ops and BLAS run single-threaded: one parallel
// region for the whole loop instead of one per small op, which on 2 cores is
// several times faster and far less sensitive to other load.
template <typename Fn>
void ForEachItemInParallel(const std::vector<WorkItem>& items, int64_t threads,
                           Deal deal, const Fn& fn) {
  UseOneThreadPool();
  if (threads == 1) {
    for (const WorkItem& item : items) fn(item, 0);
    return;
  }
  if (deal == Deal::kQueue) {
    std::atomic<size_t> next{0};
    RunOnWorkers(threads, [&](int64_t worker) {
      for (size_t i = next++; i < items.size(); i = next++) {
        fn(items[i], worker);
      }
    });
    return;
  }
  std::vector<std::vector<size_t>> own(static_cast<size_t>(threads));
  std::vector<int64_t> load(static_cast<size_t>(threads), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t w = static_cast<size_t>(
        std::min_element(load.begin(), load.end()) - load.begin());
    own[w].push_back(i);
    load[w] += std::max<int64_t>(1, items[i].cost);
  }
  RunOnWorkers(threads, [&](int64_t worker) {
    for (size_t i : own[static_cast<size_t>(worker)]) fn(items[i], worker);
  });
}

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_KERNELS_ATTENTION_BLOCKS_H_
