// LongPPL's key-token selection with a trained reference finds the synthetic
// corpus's true long-range positions well above chance.
//
// The reference is a 2-layer full-attention model trained here on short
// synthetic documents (65 tokens, binding_rate 1: bindings "<C7>. " and
// their recalls "C7. ", data/synthetic_corpus.h). Tiny models learn to copy
// a recalled value only after
// a plateau whose length grows with batch x context (an induction-style
// phase change; docs/evaluation.md gives the measurements), so the batch is
// 4 x 64 tokens and training runs until the held-out recall digits are
// learned: their mean NLL below a tenth of ln 10, checked every 1,000
// steps, with a cap. Then key tokens are selected with a short context of 8
// tokens, at most the shortest binding-to-recall distance, and compared with
// the documents' recall positions.
//
// Slow: about 10,000 steps, 75 s of one core on an idle machine.
#include <chrono>
#include <cmath>
#include <iostream>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/synthetic_corpus.h"
#include "eval/longppl.h"
#include "eval/token_scorer.h"
#include "model/config/architectures.h"
#include "model/hybrid_lm.h"
#include "train/optimizer.h"

namespace hlab::eval {
namespace {

constexpr int64_t kContext = 64, kBatch = 4;
constexpr int64_t kCheckEvery = 1000, kMaxSteps = 40000;

data::SyntheticCorpusConfig CorpusConfig(data::Split split) {
  data::SyntheticCorpusConfig c;
  c.seed = 0;
  c.split = split;
  c.min_length = c.max_length = kContext + 1;
  c.min_distance = 8;
  c.binding_rate = 1.0;
  return c;
}

model::ModelConfig ReferenceConfig() {
  model::ModelConfig c;
  c.vocab_size = 258;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.head_dim = 16;
  c.ffn_hidden = 128;
  c.layers = *model::ExpandArchitecture("full", 2);
  return c;
}

// Documents [0, n) of `corpus` as one (n, kContext + 1) batch.
torch::Tensor Batch(const data::Corpus& corpus, int64_t first, int64_t n) {
  std::vector<int32_t> flat;
  for (int64_t i = first; i < first + n; ++i) {
    absl::StatusOr<data::Document> doc = corpus.GetDocument(i);
    EXPECT_TRUE(doc.ok()) << doc.status();
    if (!doc.ok()) return torch::Tensor();
    flat.insert(flat.end(), doc->tokens.begin(), doc->tokens.end());
  }
  return torch::tensor(flat, torch::kInt64).view({n, kContext + 1});
}

// Mean NLL of the held-out documents' recall digits.
double RecallNll(model::HybridLM& lm, const data::Corpus& held,
                 const torch::Tensor& batch) {
  torch::NoGradGuard no_grad;
  const torch::Tensor logp =
      torch::log_softmax(lm->forward(batch.narrow(1, 0, kContext)), -1);
  double sum = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < batch.size(0); ++b) {
    const data::Document doc = *held.GetDocument(b);
    for (int64_t p : doc.recall_positions) {
      sum -= logp[b][p - 1][doc.tokens[static_cast<size_t>(p)]].item<double>();
      ++n;
    }
  }
  EXPECT_GT(n, 0);
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

TEST(LongPplReferenceTest, ATrainedReferenceFindsTheTrueRecallPositions) {
  at::set_num_threads(1);
  torch::manual_seed(0);
  const data::SyntheticCorpus train(CorpusConfig(data::Split::kTrain));
  const data::SyntheticCorpus held(CorpusConfig(data::Split::kHeldOut));
  const torch::Tensor held_batch = Batch(held, 0, 64);
  ASSERT_TRUE(held_batch.defined());

  model::HybridLM lm(ReferenceConfig());
  // 1e-3: learned by step 7000 here (seeds 1, 2: 4000, 8000). At 3e-3 the
  // recall NLL sat near 1 nat past step 40000 on an AMD EPYC, though it had
  // learned on the machine before: too close to the edge of stability.
  constexpr double kLr = 1e-3;
  auto optimizer = train::MakeAdamW(*lm, {.lr = kLr, .weight_decay = 0.0});
  const auto start = std::chrono::steady_clock::now();
  const double learned = 0.1 * std::log(10.0);
  double recall_nll = RecallNll(lm, held, held_batch);
  int64_t step = 0;
  while (step < kMaxSteps && recall_nll >= learned) {
    for (int64_t i = 0; i < kCheckEvery; ++i, ++step) {
      const torch::Tensor x = Batch(train, step * kBatch, kBatch);
      ASSERT_TRUE(x.defined());
      train::SetLearningRate(*optimizer,
                             kLr * std::min(1.0, (step + 1.0) / 50.0));
      torch::Tensor loss =
          lm->loss(x.narrow(1, 0, kContext), x.narrow(1, 1, kContext));
      optimizer->zero_grad();
      loss.backward();
      train::ClipGradNorm(*lm, 1.0);
      optimizer->step();
    }
    recall_nll = RecallNll(lm, held, held_batch);
    std::cout << "step " << step << ": held-out recall NLL " << recall_nll
              << " (ln 10 = 2.303), "
              << std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count()
              << " s" << std::endl;
  }
  ASSERT_LT(recall_nll, learned)
      << "the reference did not learn the recalls in " << kMaxSteps
      << " steps; the test cannot check the selection";

  ModelScorer reference(lm);
  KeyTokenConfig config;
  config.short_context = 8;  // < the 21-token binding-to-recall distance
  config.window = 8;
  config.max_tokens = kContext + 1;
  config.min_key_tokens = 0;
  absl::StatusOr<KeyTokens> keys =
      SelectKeyTokens(reference, held, config, 128);
  ASSERT_TRUE(keys.ok()) << keys.status();
  absl::StatusOr<KeyTokenAccuracy> accuracy =
      CompareWithRecallPositions(held, *keys);
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  std::cout << "key tokens: " << accuracy->selected << " selected, "
            << accuracy->hits << " of " << accuracy->true_positions
            << " true recall positions; precision " << accuracy->precision
            << ", recall " << accuracy->recall << ", chance "
            << accuracy->chance << std::endl;
  // Other tokens need more than 8 tokens of context too (the recalled key
  // letters, the sentence structure), so precision stays well below 1 even
  // for a perfect reference; what matters is how far above chance it is.
  // A random selection of the same size would hit chance * selected true
  // positions, with a binomial sd: ask for more than 10 sd above that.
  const double expected = accuracy->chance * accuracy->selected;
  const double sd = std::sqrt(expected * (1 - accuracy->chance));
  EXPECT_GT(accuracy->hits, expected + 10 * sd);
  EXPECT_GT(accuracy->precision, 2.5 * accuracy->chance);
  EXPECT_GT(accuracy->recall, 0.6);
}

}  // namespace
}  // namespace hlab::eval
