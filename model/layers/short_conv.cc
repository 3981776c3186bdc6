#include "model/layers/short_conv.h"

#include <cmath>
#include <vector>

#include <torch/torch.h>

namespace hlab::model {

ShortConvImpl::ShortConvImpl(int64_t channels, int64_t kernel_size,
                             bool with_bias)
    : kernel_size_(kernel_size) {
  TORCH_CHECK(channels > 0 && kernel_size > 0,
              "ShortConv: channels and kernel_size must be > 0, got ", channels,
              ", ", kernel_size);
  // torch.nn.Conv1d's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = K
  // for a depthwise kernel.
  const double bound = 1.0 / std::sqrt(static_cast<double>(kernel_size));
  weight = register_parameter(
      "weight",
      torch::empty({channels, 1, kernel_size}).uniform_(-bound, bound));
  if (with_bias) {
    bias = register_parameter("bias",
                              torch::empty({channels}).uniform_(-bound, bound));
  }
}

torch::Tensor ShortConvImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == weight.size(0),
              "ShortConv: expected x (B, T, ", weight.size(0), "), got ",
              x.sizes());
  // (B, C, K - 1 + T): left zero padding makes the convolution causal.
  const torch::Tensor padded =
      torch::constant_pad_nd(x.transpose(1, 2), {kernel_size_ - 1, 0}, 0);
  const std::vector<int64_t> stride = {1}, padding = {0}, dilation = {1};
  return torch::conv1d(padded, weight, bias, stride, padding, dilation,
                       /*groups=*/weight.size(0))
      .transpose(1, 2);
}

torch::Tensor ShortConvImpl::tail(const torch::Tensor& x) const {
  TORCH_CHECK(x.dim() == 3, "ShortConv: expected x (B, T, C), got ", x.sizes());
  // (B, K - 1 + T, C), zeros first; its last K - 1 rows.
  const torch::Tensor padded =
      torch::constant_pad_nd(x, {0, 0, kernel_size_ - 1, 0}, 0);
  return padded.narrow(1, x.size(1), kernel_size_ - 1).contiguous();
}

torch::Tensor ShortConvImpl::step(const torch::Tensor& x,
                                  torch::Tensor* tail) const {
  TORCH_CHECK(
      tail != nullptr && tail->dim() == 3 && tail->size(1) == kernel_size_ - 1,
      "ShortConv: step needs the tail of the inputs before x");
  // (B, C, K - 1 + T): the tail is the causal padding.
  const torch::Tensor window =
      torch::cat({*tail, x.to(tail->scalar_type())}, 1);
  const std::vector<int64_t> stride = {1}, padding = {0}, dilation = {1};
  torch::Tensor y = torch::conv1d(window.transpose(1, 2), weight, bias, stride,
                                  padding, dilation,
                                  /*groups=*/weight.size(0))
                        .transpose(1, 2);
  *tail = window.narrow(1, x.size(1), kernel_size_ - 1).contiguous();
  return y;
}

}  // namespace hlab::model
