// Linear layers whose CPU products run on LibTorch's intra-op (OpenMP)
// threads: torch::nn::Linear's parameters and names (checkpoints are the
// same), with the fp32 / fp64 CPU matmul of forward and backward split by
// rows over at::get_num_threads() workers, each a single-threaded GEMM.
//
// Why: Debian's LibTorch multiplies fp32 through OpenBLAS's own pthreads,
// a second thread pool beside OpenMP's. On a small machine the two pools'
// spinning waits take turns on the same cores between a step's matmuls and
// its element-wise and attention loops. Here all of a step's work shares one
// pool (the first call makes OpenBLAS single-threaded for the process:
// internal::UseOneThreadPool), and --threads N means N threads for
// everything. Under CPU bf16 autocast the product is oneDNN's bf16 x bf16
// -> fp32 GEMM, rows split over the same OpenMP threads and taken in
// 256-row chunks that are rounded to bf16 while in cache (x on the way in,
// the product on the way out, once, as autocast's linear gives); the weight
// gradient stays fp32. With a bias, other autocast dtypes or on
// other devices, it is at::linear.
//
// Not thread-safe (a module); LinearProduct is.
//
//   Linear proj(LinearOptions(256, 512).bias(false));
//   torch::Tensor y = proj->forward(x);           // (..., 256) -> (..., 512)
//   torch::Tensor z = LinearProduct(x, w);        // x w^T, w: (512, 256)
//   torch::Tensor qk = ConcatenatedLinear(x, {q_proj, k_proj});
#ifndef HLAB_MODEL_LAYERS_LINEAR_H_
#define HLAB_MODEL_LAYERS_LINEAR_H_

#include <vector>

#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace hlab::model {

using torch::nn::LinearOptions;

// x (..., in) times weight (out, in) transposed, plus bias if defined:
// (..., out). Differentiable once.
torch::Tensor LinearProduct(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias = {});

// The dtype LinearProduct multiplies an input of dtype t in: bf16 for an
// fp32 or bf16 input under CPU bf16 autocast, else t. A producer that
// writes its output in this dtype spares the product a rounding pass (the
// values are the same).
torch::ScalarType LinearInputDtype(torch::ScalarType t);

class LinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  torch::Tensor forward(const torch::Tensor& x);
};
TORCH_MODULE(Linear);

// The products of one input x (..., in) with several layers, as one product
// with their weights concatenated (out_1 + ... + out_n, in): one GEMM reads
// x once, and the backward takes one dx product where separate layers take
// n products and n - 1 sums of their gradients. Returns (..., out_1 + ... +
// out_n), the layers' outputs side by side (split_with_sizes gives them);
// the layers keep their own parameters and names. Layers with a bias take
// separate products, concatenated. Requires at least one layer.
//
// Worth it for narrow groups only. Measured fwd + bwd, x (8192, 256), 2
// threads, separate vs concatenated: fp32 outputs 256+128+128 42.4 vs 38.6
// ms, 3 x 256 59.5 vs 55.8, 4 x 256 79.1 vs 85.9, 704+704 106 vs 127; bf16
// 3 x 256 29.7 vs 28.5, 704+704 56.3 vs 60.6, 1024+1024 83 vs 109. So
// attention's q, k, v and GDN's q, k, v, beta, decay are one product each,
// and the SwiGLU gate and up stay apart.
torch::Tensor ConcatenatedLinear(const torch::Tensor& x,
                                 const std::vector<Linear>& layers);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_LINEAR_H_
