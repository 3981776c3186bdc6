// Initialisation constants shared by the mixers (declared in model/mixer.h).
#include <cmath>

#include "model/mixer.h"

namespace hlab::model {

double ResidualInitStd(const ModelConfig& config) {
  return config.init_std /
         std::sqrt(2.0 * static_cast<double>(config.n_layers));
}

}  // namespace hlab::model
