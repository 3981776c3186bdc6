// Gradient profiling (appendix D.3 of the study): how strongly the
// prediction at a position depends on each token before it, as the mean
// input-gradient norm at each distance.
//
// For each sequence x_0..x_{T-1} the scalar is the logit of the true next
// token at the last position, s = logits[T-1][x_T] (the paper's "logit-based
// scalar", the target logit), and
//   G(d) = mean over sequences of || d s / d e_{T-1-d} ||_2,  d = 0..T-1,
// where e_j is token j's input embedding (HybridLM::forward_embedded). One
// backward pass per batch gives every distance. Distances are binned
// log-spaced: [0, 1), [1, 2), [2, 4), ..., the last bin ending at T. The
// flat baseline G_base is the mean G over the far quarter of distances,
// d in [3T/4, T); `reach` is the lower edge of the first bin from which
// every bin's mean G is within kReachFactor (1.5) x G_base (0 when even
// the nearest bin is), i.e. the distance beyond which the training signal
// is at its long-range floor. A model whose receptive field ends at R
// (SWA(w) layers only: R = L (w - 1)) has G(d) exactly 0 for d > R.
//
// Thread-safety: a free function; uses the model from the calling thread.
//
//   HLAB_ASSIGN_OR_RETURN(GradientProfileResult g,
//                         ProfileGradients(model, sequences));
//   // g.distances[d], g.bins[i].ratio (G / G_base), g.reach
#ifndef HLAB_EVAL_GRADIENT_PROFILE_H_
#define HLAB_EVAL_GRADIENT_PROFILE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {

inline constexpr double kReachFactor = 1.5;

struct GradientBin {
  int64_t from = 0, to = 0;  // distances [from, to)
  double g = 0;              // mean G over the bin's distances
  double ratio = 0;          // g / G_base (0 when G_base is 0)
};

struct GradientProfileResult {
  std::vector<double> distances;  // G(d), d = 0..T-1
  std::vector<GradientBin> bins;
  double baseline = 0;  // G_base
  int64_t reach = 0;
  int64_t sequences = 0;
};

// sequences: each of T + 1 tokens (the last is the target of position
// T-1), T >= 8, all the same length; batch_sequences per backward pass.
// InvalidArgument naming the problem for bad input.
absl::StatusOr<GradientProfileResult> ProfileGradients(
    model::HybridLM& model, const std::vector<std::vector<int32_t>>& sequences,
    int64_t batch_sequences = 8);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_GRADIENT_PROFILE_H_
