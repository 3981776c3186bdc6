#include "model/kernels/cuda_graphs.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#ifdef HLAB_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace hlab::model {
namespace {

// -1: not yet read from the environment; 0 off; 1 on.
std::atomic<int> graphs_state{-1};

#ifdef HLAB_WITH_CUDA
struct CapturedGraph {
  at::cuda::CUDAGraph graph;
  std::vector<torch::Tensor> inputs, outputs;  // the graph's own buffers
};

struct GraphCache {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<CapturedGraph>> graphs;
  std::set<std::string> failed;
};

GraphCache& Cache() {
  static GraphCache* cache = new GraphCache();  // never destroyed: graphs
  return *cache;                                // outlive static teardown
}

// Captures `body` on a side stream after one uncaptured warm-up run there
// (cuBLAS sets up its workspace outside a capture). Throws on failure.
std::unique_ptr<CapturedGraph> Capture(
    const std::vector<torch::Tensor>& inputs,
    const std::function<std::vector<torch::Tensor>()>& make_outputs,
    const std::function<void(const std::vector<torch::Tensor>&,
                             std::vector<torch::Tensor>&)>& body) {
  auto captured = std::make_unique<CapturedGraph>();
  for (const torch::Tensor& in : inputs) {
    captured->inputs.push_back(
        in.defined() ? in.clone(at::MemoryFormat::Contiguous) : in);
  }
  captured->outputs = make_outputs();
  torch::cuda::synchronize();
  {
    const c10::cuda::CUDAStreamGuard stream(c10::cuda::getStreamFromPool());
    body(captured->inputs, captured->outputs);
    torch::cuda::synchronize();
    captured->graph.capture_begin();
    try {
      body(captured->inputs, captured->outputs);
    } catch (...) {
      try {
        captured->graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    captured->graph.capture_end();
  }
  torch::cuda::synchronize();
  return captured;
}
#endif

}  // namespace

bool CudaGraphsEnabled() {
  int state = graphs_state.load();
  if (state < 0) {
    const char* env = std::getenv("HLAB_CUDA_GRAPHS");
    state = env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
    graphs_state.store(state);
  }
  return state == 1;
}

void SetCudaGraphs(bool on) { graphs_state.store(on ? 1 : 0); }

std::string GraphKey(const std::string& kind,
                     const std::vector<torch::Tensor>& inputs) {
  std::ostringstream key;
  key << kind;
  for (const torch::Tensor& in : inputs) {
    key << '|';
    if (!in.defined()) {
      key << "undefined";
      continue;
    }
    key << in.sizes() << ' ' << in.scalar_type() << ' ' << in.device();
  }
  return key.str();
}

bool RunCaptured(
    const std::string& key, const std::vector<torch::Tensor>& inputs,
    const std::function<std::vector<torch::Tensor>()>& make_outputs,
    const std::function<void(const std::vector<torch::Tensor>&,
                             std::vector<torch::Tensor>&)>& body,
    std::vector<torch::Tensor>* outputs) {
#ifdef HLAB_WITH_CUDA
  if (!CudaGraphsEnabled() || inputs.empty() || !inputs[0].defined() ||
      !inputs[0].is_cuda()) {
    return false;
  }
  GraphCache& cache = Cache();
  const std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.failed.count(key) > 0) return false;
  auto it = cache.graphs.find(key);
  if (it == cache.graphs.end()) {
    const c10::cuda::CUDAGuard device(inputs[0].device());
    try {
      it = cache.graphs.emplace(key, Capture(inputs, make_outputs, body)).first;
    } catch (const std::exception& e) {
      cache.failed.insert(key);
      std::cerr << "hlab: CUDA graph capture failed for " << key
                << "; running the kernels one by one instead: " << e.what()
                << "\n";
      return false;
    }
  }
  CapturedGraph& captured = *it->second;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) captured.inputs[i].copy_(inputs[i]);
  }
  captured.graph.replay();
  outputs->clear();
  for (const torch::Tensor& out : captured.outputs) {
    outputs->push_back(out.clone());
  }
  return true;
#else
  (void)key, (void)inputs, (void)make_outputs, (void)body, (void)outputs;
  return false;
#endif
}

}  // namespace hlab::model
