// Multiple-choice tasks with a real HybridLM: the harness's batched
// scoring (the choices of 16 questions per ModelScorer::ScoreBatch, runs of
// equal length batched) gives each question the log-likelihoods of scoring
// its sequences one at a time, and so the same predictions.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/tokenizer.h"
#include "eval/multiple_choice.h"
#include "eval/token_scorer.h"
#include "model/config/architectures.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {
namespace {

// The TokenScorer default: one Score per sequence.
class OneAtATime final : public TokenScorer {
 public:
  explicit OneAtATime(ModelScorer& model) : model_(model) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    return model_.Score(tokens);
  }

 private:
  ModelScorer& model_;
};

TEST(MultipleChoiceModelTest, BatchedScoresEqualOneSequenceAtATime) {
  at::set_num_threads(1);
  torch::manual_seed(0);
  model::ModelConfig c;
  c.vocab_size = 258;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.head_dim = 8;
  c.ffn_hidden = 64;
  c.layers = *model::ExpandArchitecture("full", 2);
  ModelScorer batched(model::HybridLM{c});
  OneAtATime plain(batched);
  auto tok = data::MakeByteTokenizer();
  McTaskConfig config;
  config.name = "simple_qa";
  config.file = std::string(HLAB_REPO_ROOT) + "/examples/eval/simple_qa.jsonl";
  config.fewshot_file =
      std::string(HLAB_REPO_ROOT) + "/examples/eval/simple_qa_fewshot.jsonl";
  config.num_fewshot = 1;
  auto task = PrepareMcTask(config, *tok, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  auto a = ScoreMcTask(batched, *task);
  auto b = ScoreMcTask(plain, *task);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->scores.size(), 20u);
  for (size_t q = 0; q < a->scores.size(); ++q) {
    ASSERT_EQ(a->scores[q].loglikelihood.size(),
              b->scores[q].loglikelihood.size());
    for (size_t k = 0; k < a->scores[q].loglikelihood.size(); ++k) {
      EXPECT_NEAR(a->scores[q].loglikelihood[k], b->scores[q].loglikelihood[k],
                  1e-4)
          << q << " " << k;
      EXPECT_LT(a->scores[q].loglikelihood[k], 0);
    }
    EXPECT_EQ(a->scores[q].pred, b->scores[q].pred) << q;
    EXPECT_EQ(a->scores[q].pred_norm, b->scores[q].pred_norm) << q;
  }
  EXPECT_EQ(a->correct, b->correct);
  EXPECT_EQ(a->correct_norm, b->correct_norm);
}

}  // namespace
}  // namespace hlab::eval
