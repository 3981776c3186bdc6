// Layer-wise probing (appendix D.2 of the study): how linearly the answer of
// a needle-in-a-haystack sample can be read from the residual stream at the
// query position, layer by layer.
//
// Data: synthetic-haystack single-needle NIAH samples (eval/niah.h, the
// synthetic corpus's own binding sentences, so a model trained on it can
// retrieve), with the needle's value as the class. The corpus has 10
// values; the probe's `classes` are the first of them ("0".."7" for 8), and
// samples whose value is another one are skipped (and counted), so the
// classes are drawn uniformly. Sample i has depth depths[i % depths] and is
// eval/niah.h's pure function of (seed, "single", length, depth, i).
//
// Features: at the last prompt token (the recall's key letter, where the
// model must predict the value), the token embedding (layer 0) and the
// residual stream after each block k (layer k = 1..L), in fp64.
//
// Probe, per layer: the samples split per class into train and test (of a
// class's samples in order, the r-th is test when
// floor((r + 1) f) > floor(r f), f = test_fraction: stratified and
// deterministic); every feature z-scored with the train split's mean and
// standard deviation (a constant feature becomes 0); a multinomial logistic
// (softmax) classifier W x + b fitted in fp64 by L-BFGS (strong Wolfe line
// search) to
//   mean cross-entropy + (l2 / 2) ||W||_F^2   (the bias is not penalised),
// from zero. Reported: test accuracy with its Wilson 95% interval, train
// accuracy, and the peak layer (the first with the highest test accuracy).
// Chance is 1 / classes.
//
// Thread-safety: free functions; ProbeNiahLayers uses the model from the
// calling thread (and changes its hidden-state capture for the call).
//
//   ProbingConfig config;
//   config.context_length = 256;
//   HLAB_ASSIGN_OR_RETURN(ProbingResult r,
//                         ProbeNiahLayers(model, *tokenizer, config));
//   // r.layers[k].accuracy, r.layers[k].lo / hi, r.peak_layer
#ifndef HLAB_EVAL_PROBING_H_
#define HLAB_EVAL_PROBING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "eval/niah.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {

inline constexpr double kWilsonZ = 1.959963984540054;  // 95%

struct ProbeOptions {
  double test_fraction = 0.25;  // in (0, 1)
  double l2 = 1e-2;             // >= 0
  int64_t max_iterations = 200;
};

struct ProbeFit {
  int64_t train = 0, test = 0, correct = 0;
  double accuracy = 0;        // on test
  double lo = 0, hi = 0;      // Wilson 95% interval of `accuracy`
  double train_accuracy = 0;  // on train
};

// The stratified split: is_test[i] for each label (see above).
std::vector<bool> ProbeSplit(const std::vector<int>& labels, int classes,
                             double test_fraction);

// Wilson score interval [lo, hi] of `correct` successes in `n` trials.
std::pair<double, double> WilsonInterval(int64_t correct, int64_t n,
                                         double z = kWilsonZ);

// Fits and tests a probe on features (n, d) (any floating dtype) with
// labels in [0, classes). InvalidArgument for mismatched sizes, a label out
// of range, classes < 2, bad options, or a split with an empty side.
absl::StatusOr<ProbeFit> FitLinearProbe(const torch::Tensor& features,
                                        const std::vector<int>& labels,
                                        int classes,
                                        const ProbeOptions& options = {});

struct ProbingConfig {
  int64_t context_length = 0;  // tokens of prompt + answer; required
  std::vector<double> depths = {0.1, 0.3, 0.5, 0.7, 0.9};
  int64_t samples = 512;  // kept samples (all classes)
  int classes = 8;        // 2 .. 10
  uint64_t seed = 0;
  uint64_t corpus_seed = 0;  // the haystack's lexicon (the run's data.seed)
  int64_t batch_sequences = 8;
  ProbeOptions probe;
};

struct ProbeLayer {
  int64_t layer = 0;  // 0: the embeddings; k: after block k
  std::string mixer;  // "embedding", or block k's mixer kind
  ProbeFit fit;
};

struct ProbingResult {
  std::vector<ProbeLayer> layers;  // 0 .. L
  int classes = 0;
  double chance = 0;
  int64_t samples = 0;  // kept
  int64_t skipped = 0;  // drawn with a value outside the classes
  int64_t peak_layer = 0;
  double peak_accuracy = 0;
};

// Called as features are gathered, with (samples done, samples in all).
using ProbingProgress = std::function<void(int64_t, int64_t)>;

// Generates the samples, gathers the features and fits a probe per layer.
// InvalidArgument naming the field ("context_length: ...", "classes",
// "depths[1]", "samples") for bad input, including a context length that
// cannot hold the needle, question and answer.
absl::StatusOr<ProbingResult> ProbeNiahLayers(
    model::HybridLM& model, const data::Tokenizer& tokenizer,
    const ProbingConfig& config, const ProbingProgress& progress = {});

}  // namespace hlab::eval

#endif  // HLAB_EVAL_PROBING_H_
