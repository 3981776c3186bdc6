// ShortConv: causal depthwise 1-D convolution over time, the "short conv"
// that Mamba-2 and Gated DeltaNet may apply before their SiLU.
//
// Output t of channel c is sum_{j<K} weight[c, 0, j] * x[t - (K - 1) + j, c]
// (+ bias[c]), with x before 0 taken as 0, so output t sees inputs t-K+1..t.
// Parameters: `weight` (C, 1, K) as in torch.nn.Conv1d(groups=C) and, when
// enabled, `bias` (C), both initialised U(-1/sqrt(K), 1/sqrt(K)) as Conv1d.
//
// Not thread-safe (a module).
//
//   ShortConv conv(/*channels=*/768, /*kernel_size=*/4, /*bias=*/false);
//   torch::Tensor y = conv->forward(x);  // x, y: (B, T, 768)
//   // Decoding: the last K - 1 inputs are the state.
//   torch::Tensor tail = conv->tail(x);              // (B, K - 1, 768)
//   torch::Tensor y1 = conv->step(x_next, &tail);    // x_next: (B, 1, 768)
#ifndef HLAB_MODEL_LAYERS_SHORT_CONV_H_
#define HLAB_MODEL_LAYERS_SHORT_CONV_H_

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace hlab::model {

class ShortConvImpl : public torch::nn::Module {
 public:
  ShortConvImpl(int64_t channels, int64_t kernel_size, bool with_bias);

  // x: (B, T, C) -> (B, T, C), causal in T.
  torch::Tensor forward(const torch::Tensor& x);

  int64_t kernel_size() const { return kernel_size_; }

  // Decoding. tail: x's last K - 1 inputs (zeros before the first), (B, K -
  // 1, C): what the outputs after x need of it. step: x: (B, T, C), the
  // inputs after those *tail ends with -> forward's outputs at them, and
  // *tail advanced past them.
  torch::Tensor tail(const torch::Tensor& x) const;
  torch::Tensor step(const torch::Tensor& x, torch::Tensor* tail) const;

  torch::Tensor weight;  // (C, 1, K)
  torch::Tensor bias;    // (C), undefined without bias

 private:
  int64_t kernel_size_;
};
TORCH_MODULE(ShortConv);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_SHORT_CONV_H_
