// Exact parameter and FLOP counts of a ModelConfig, in closed form, and the
// appendix-B parameter matching of hybrid variants to the Full backbone.
//
// No LibTorch: the coordinator uses these to size budgets (D = ratio * N) and
// estimate compute. Tests check them against the built model's tensors.
// Thread-safe (pure functions).
//
//   ParamCount count = CountParameters(config);
//   std::cout << count.non_embedding << " / " << count.total;
//   auto matched = MatchParameters(config);  // within 2% of Full's N
//
// Parameter layout per mixer (no biases anywhere):
//   full/swa/hswa  q d*H*dh, k d*Hkv*dh, v d*Hkv*dh, o H*dh*d, sinks H
//   lightning      q, k, v, o as attention (no sinks); out_norm H*dh,
//                  gate_down d*dh, gate_up dh*H*dh
//   mamba2         in_proj d*(2*di + 2*N + Hm), A_log Hm, dt_bias Hm, D Hm,
//                  norm di, out_proj di*d; conv: (di + 2N)*(K + 1)
//                  where di = expand*d, Hm = di / ssm_head_dim
//   gdn            q d*Hqk*dk, k d*Hqk*dk, v d*Hg*dv, g d*Hg*dv,
//                  o Hg*dv*d, a d*Hg, b d*Hg, A_log Hg, dt_bias Hg,
//                  o_norm dv; conv: (2*Hqk*dk + Hg*dv)*K (depthwise, no
//                  bias), where Hqk = Hg / (H / Hkv) (grouped, the default)
//                  or Hg (gdn_mha)
//   each layer     two RMSNorm weights (d each) and SwiGLU 3*d*ffn
//   model          embedding V*d, final norm d, LM head V*d unless tied
// Non-embedding N excludes the token embedding and the LM head.
#ifndef HLAB_MODEL_CONFIG_PARAM_COUNT_H_
#define HLAB_MODEL_CONFIG_PARAM_COUNT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config/model_config.h"

namespace hlab::model {

struct LayerParamCount {
  int64_t mixer = 0;
  int64_t ffn = 0;
  int64_t norms = 0;
  int64_t total() const { return mixer + ffn + norms; }
};

struct ParamCount {
  int64_t embedding = 0;      // token embedding (+ untied LM head)
  int64_t non_embedding = 0;  // N: layers + final norm
  int64_t total = 0;
  std::vector<LayerParamCount> layers;
};

// Parameters of one mixer.
int64_t CountMixerParameters(const ModelConfig& config, const MixerSpec& spec);

// The whole model. The config must be valid.
ParamCount CountParameters(const ModelConfig& config);

// Model FLOPs per trained token (forward + backward = 3x forward) at sequence
// length T, nanoGPT/PaLM convention: 6 * (N + V*d) for the weight multiplies
// plus each mixer's sequence term. SWA counts only its window (useful work).
double TrainingFlopsPerToken(const ModelConfig& config, int64_t seq_len);

// The same model with every mixer replaced by full attention: the Full
// backbone a hybrid is compared with.
ModelConfig FullBackbone(const ModelConfig& config);

struct MatchReport {
  ModelConfig config;            // the matched config
  int64_t target_non_embedding;  // Full backbone's N
  int64_t non_embedding;         // matched N
  double relative_gap;           // (N - target) / target
  // Parameters of Mamba-2 layers beyond a Full layer's (B.4 keeps them
  // larger): part of N, not held to the tolerance.
  int64_t exempt_excess = 0;
};

// Appendix-B matching: adjusts each efficient layer kind's own dimensions so
// the model's N comes within `tolerance` (relative) of the Full backbone:
//   swa/hswa   nothing to adjust (same parameters as full);
//   lightning  the FFN hidden size of Lightning layers (B.2);
//   gdn        dk = dv (B.3), then the FFN of GDN layers if still outside;
//   mamba2     nothing (B.4 keeps its FFN and lets it be 5-8% larger): its
//              layers' excess over a Full layer is reported in
//              exempt_excess and left out of the tolerance.
// FailedPrecondition if no adjustment gets within tolerance.
absl::StatusOr<MatchReport> MatchParameters(const ModelConfig& config,
                                            double tolerance = 0.02);

// The dimensions appendix B sets in a (matched) config, one clause per
// efficient mixer kind, each with its rule, e.g.
//   "gdn dk = dv 45, q/k heads 2 of 8 value heads, FFN 1408 (B.3)"
//   "mamba2 state 16, head dim 64, expand 1, FFN 1408, layer +5.4% (B.4)"
// and "" for a model of softmax layers only.
std::string DescribeMatch(const ModelConfig& config);

}  // namespace hlab::model

#endif  // HLAB_MODEL_CONFIG_PARAM_COUNT_H_
