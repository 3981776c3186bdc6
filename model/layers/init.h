// Bias-free linear layers initialised N(0, std), shared by the mixers and
// the feed-forward block. Private to model/.
#ifndef HLAB_MODEL_LAYERS_INIT_H_
#define HLAB_MODEL_LAYERS_INIT_H_

#include <cstdint>

#include "model/layers/linear.h"

namespace hlab::model::internal {

// in -> out, no bias, weight ~ N(0, std).
Linear MakeLinear(int64_t in, int64_t out, double std);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_LAYERS_INIT_H_
