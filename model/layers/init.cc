// Initialisation shared by the mixers (model/layers/mixer.h,
// model/layers/init.h).
#include "model/layers/init.h"

#include <cmath>

#include <torch/torch.h>

#include "model/layers/mixer.h"

namespace hlab::model {

double ResidualInitStd(const ModelConfig& config) {
  return config.init_std /
         std::sqrt(2.0 * static_cast<double>(config.n_layers));
}

namespace internal {

Linear MakeLinear(int64_t in, int64_t out, double std) {
  Linear linear(LinearOptions(in, out).bias(false));
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std);
  return linear;
}

}  // namespace internal
}  // namespace hlab::model
