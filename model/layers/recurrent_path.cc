#include "model/layers/recurrent_path.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/kernels/gated_delta_kernel.h"
#include "model/kernels/recurrent_scan.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model {
namespace {

void CheckState(RecurrentPath path, const MixerState* state) {
  TORCH_CHECK(state != nullptr || path == RecurrentPath::kChunked ||
                  path == RecurrentPath::kRecurrent,
              "recurrent mixer: prefill and step need a state");
  TORCH_CHECK(path != RecurrentPath::kStep || state->recurrent.defined(),
              "recurrent mixer: step needs the state of a prefill");
}

}  // namespace

torch::Tensor RunScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& g,
                           double scale, int64_t chunk, RecurrentPath path,
                           MixerState* state) {
  CheckState(path, state);
  switch (path) {
    case RecurrentPath::kChunked:
      return ChunkedScalarGla(q, k, v, g, scale, chunk);
    case RecurrentPath::kRecurrent:
      return RecurrentScalarGla(q, k, v, g, scale);
    case RecurrentPath::kPrefill: {
      torch::Tensor o = ChunkedScalarGla(q, k, v, g, scale, chunk);
      state->recurrent = torch::Tensor();
      ScalarGlaScan(torch::Tensor(), k, v, g, scale, &state->recurrent);
      state->position = v.size(2);
      return o;
    }
    case RecurrentPath::kStep: {
      torch::Tensor o = ScalarGlaScan(q, k, v, g, scale, &state->recurrent);
      state->position += v.size(2);
      return o;
    }
  }
  throw std::logic_error("RunScalarGla: unknown path");
}

torch::Tensor RunGatedDelta(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& g,
                            const torch::Tensor& beta, double scale,
                            int64_t chunk, RecurrentPath path,
                            MixerState* state) {
  CheckState(path, state);
  switch (path) {
    case RecurrentPath::kChunked:
      return ChunkedGatedDelta(q, k, v, g, beta, scale, chunk);
    case RecurrentPath::kRecurrent:
      return RecurrentGatedDelta(q, k, v, g, beta, scale);
    case RecurrentPath::kPrefill: {
      torch::Tensor o = ChunkedGatedDelta(q, k, v, g, beta, scale, chunk);
      state->recurrent = torch::Tensor();
      GatedDeltaScan(torch::Tensor(), k, v, g, beta, scale, &state->recurrent);
      state->position = v.size(2);
      return o;
    }
    case RecurrentPath::kStep: {
      torch::Tensor o =
          GatedDeltaScan(q, k, v, g, beta, scale, &state->recurrent);
      state->position += v.size(2);
      return o;
    }
  }
  throw std::logic_error("RunGatedDelta: unknown path");
}

torch::Tensor RunShortConv(ShortConv& conv, const torch::Tensor& x,
                           RecurrentPath path, MixerState* state) {
  switch (path) {
    case RecurrentPath::kChunked:
    case RecurrentPath::kRecurrent:
      return conv->forward(x);
    case RecurrentPath::kPrefill:
      TORCH_CHECK(state != nullptr, "short conv: prefill needs a state");
      state->conv = conv->tail(x);
      return conv->forward(x);
    case RecurrentPath::kStep:
      TORCH_CHECK(state != nullptr && state->conv.defined(),
                  "short conv: step needs the state of a prefill");
      return conv->step(x, &state->conv);
  }
  throw std::logic_error("RunShortConv: unknown path");
}

}  // namespace hlab::model
