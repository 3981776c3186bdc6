// RecurrentPath: the form a recurrent mixer (Lightning, Mamba2,
// GatedDeltaNet) runs its kernel in, and the helpers that run each form, so
// the three mixers' forward, reference, prefill and step share one body.
//
//   kChunked    forward(): the chunked kernel
//   kRecurrent  forward_reference(): the step-by-step reference
//   kPrefill    prefill(): the chunked kernel, and the state after the last
//               token from a scan over the sequence (recurrent_scan.h)
//   kStep       step(): the scan from the state
//
// Thread-safe: pure functions (the state is the caller's).
//
//   torch::Tensor o = RunScalarGla(q, k, v, g, scale, chunk, path, state);
#ifndef HLAB_MODEL_LAYERS_RECURRENT_PATH_H_
#define HLAB_MODEL_LAYERS_RECURRENT_PATH_H_

#include <cstdint>

#include <torch/types.h>

#include "model/layers/mixer.h"
#include "model/layers/short_conv.h"

namespace hlab::model {

enum class RecurrentPath { kChunked, kRecurrent, kPrefill, kStep };

// The scalar-GLA kernel in `path`'s form (shapes: scalar_gla_kernel.h).
// kPrefill sets state->recurrent and state->position (T); kStep advances
// them. `state` may be null for kChunked and kRecurrent.
torch::Tensor RunScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                           const torch::Tensor& v, const torch::Tensor& g,
                           double scale, int64_t chunk, RecurrentPath path,
                           MixerState* state);

// The same for the gated-delta kernel (shapes: gated_delta_kernel.h).
torch::Tensor RunGatedDelta(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& g,
                            const torch::Tensor& beta, double scale,
                            int64_t chunk, RecurrentPath path,
                            MixerState* state);

// conv(x) for kChunked and kRecurrent; kPrefill also sets state->conv to
// x's tail, kStep continues from it (ShortConvImpl::step).
torch::Tensor RunShortConv(ShortConv& conv, const torch::Tensor& x,
                           RecurrentPath path, MixerState* state);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_RECURRENT_PATH_H_
