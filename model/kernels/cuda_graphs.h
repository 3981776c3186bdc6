// Replaying a fixed sequence of CUDA kernels through a CUDA graph: for the
// kernels' sequential loops (GDN's scan over chunks launches a few kernels a
// chunk; a graph replays them all with one launch from the host).
//
// RunCaptured captures `body` once per key into a graph whose inputs and
// outputs are its own buffers, then on every call copies the inputs in,
// replays the graph and returns clones of the outputs. `body` must read
// only its inputs, write only its outputs, and launch the same kernels
// whatever the values (no host reads, no data-dependent shapes); what it
// allocates is kept in the graph's memory pool.
//
// Off by default: HLAB_CUDA_GRAPHS=1 in the environment, or
// SetCudaGraphs(true), turns it on. It is built only against a CUDA
// LibTorch (HLAB_WITH_CUDA); elsewhere RunCaptured returns false and the
// caller runs `body` itself. It also returns false, having run nothing, for
// non-CUDA inputs; a capture that fails is reported once on stderr and the
// key is not tried again.
//
// Thread-safe: the graph cache is guarded by a mutex, and one graph replays
// at a time.
//
//   std::vector<torch::Tensor> out;
//   if (!RunCaptured(key, {u, w}, make_outputs, body, &out)) {
//     out = make_outputs();
//     body({u, w}, out);
//   }
#ifndef HLAB_MODEL_KERNELS_CUDA_GRAPHS_H_
#define HLAB_MODEL_KERNELS_CUDA_GRAPHS_H_

#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace hlab::model {

// Whether RunCaptured captures and replays (default: the environment's
// HLAB_CUDA_GRAPHS == "1").
bool CudaGraphsEnabled();
void SetCudaGraphs(bool on);

// A key naming the kind of body and every input's shape, dtype and device
// (undefined inputs included), so that one graph serves one layout.
std::string GraphKey(const std::string& kind,
                     const std::vector<torch::Tensor>& inputs);

// See the file comment. `inputs` may hold undefined tensors (passed to
// `body` as undefined); `make_outputs` allocates the outputs.
bool RunCaptured(
    const std::string& key, const std::vector<torch::Tensor>& inputs,
    const std::function<std::vector<torch::Tensor>()>& make_outputs,
    const std::function<void(const std::vector<torch::Tensor>&,
                             std::vector<torch::Tensor>&)>& body,
    std::vector<torch::Tensor>* outputs);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_CUDA_GRAPHS_H_
