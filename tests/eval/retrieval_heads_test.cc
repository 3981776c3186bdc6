// Retrieval-head tracing (eval/retrieval_heads.h) with known answers: a
// hand-built attention whose head 1 attends exactly to the needle's value
// scores 1 for that head and 0 for the others (under both match rules), with
// needle mass 1 and entropy 0, while a uniform head has entropy 1; a head that
// points at the needle while the model generates another token does not score;
// the top heads are ordered by score, then mass. The NIAH pipeline traces every
// head of every full-attention layer, deterministically. Bad input is named.
#include "eval/retrieval_heads.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/tokenizer.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"

namespace hlab::eval {
namespace {

// A 12-token sequence whose needle spans [4, 8) with the value 7 at 6; the
// answer (7) is the last token, predicted at query 10.
const std::vector<int32_t> kSequence = {1, 2, 3, 9, 20, 21, 7, 22, 5, 6, 30, 7};
constexpr int64_t kNeedleBegin = 4, kNeedleEnd = 8, kValueAt = 6;
constexpr int64_t kQuery = 10;

// (3, T, T) causal probabilities: head 0 uniform over the visible keys,
// head 1 one-hot on the value, head 2 one-hot on token 0 (outside the
// needle). Rows other than kQuery are uniform.
torch::Tensor HandBuiltAttention() {
  const int64_t t = static_cast<int64_t>(kSequence.size());
  torch::Tensor p = torch::zeros({3, t, t}, torch::kFloat32);
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t q = 0; q < t; ++q) {
      for (int64_t k = 0; k <= q; ++k) p[h][q][k] = 1.0 / (q + 1);
    }
  }
  p[1][kQuery].zero_();
  p[1][kQuery][kValueAt] = 1.0;
  p[2][kQuery].zero_();
  p[2][kQuery][0] = 1.0;
  return p;
}

TEST(TallyRetrievalTest, TheHeadOnTheNeedleScoresOneAndTheOthersZero) {
  std::vector<HeadTally> tallies;
  ASSERT_TRUE(TallyRetrieval(HandBuiltAttention(), kSequence, kNeedleBegin,
                             kNeedleEnd, {{kQuery, 7, 7}}, 3, &tallies)
                  .ok());
  const std::vector<RetrievalHead> heads = SummariseRetrieval(tallies);
  ASSERT_EQ(heads.size(), 3u);
  EXPECT_EQ(heads[1].layer, 3);
  EXPECT_EQ(heads[1].head, 1);
  EXPECT_EQ(heads[1].copied, 1);
  EXPECT_DOUBLE_EQ(heads[1].score, 1.0);
  EXPECT_DOUBLE_EQ(heads[1].needle_mass, 1.0);
  EXPECT_DOUBLE_EQ(heads[1].entropy, 0.0);
  // Uniform over 11 keys: mass 4/11 on the needle, normalised entropy 1,
  // and its top-1 (the first of the ties) is key 0, outside the needle.
  EXPECT_DOUBLE_EQ(heads[0].score, 0.0);
  EXPECT_NEAR(heads[0].needle_mass, 4.0 / 11, 1e-6);
  EXPECT_NEAR(heads[0].entropy, 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(heads[2].score, 0.0);
  EXPECT_DOUBLE_EQ(heads[2].needle_mass, 0.0);
  EXPECT_EQ(TopRetrievalHeads(heads, 2), (std::vector<int>{1, 0}));
}

TEST(TallyRetrievalTest, PointingAtTheNeedleWithoutCopyingDoesNotScore) {
  std::vector<HeadTally> tallies;
  // The model generates 8, not the 7 the head attends to.
  ASSERT_TRUE(TallyRetrieval(HandBuiltAttention(), kSequence, kNeedleBegin,
                             kNeedleEnd, {{kQuery, 8, 7}}, 0, &tallies)
                  .ok());
  const std::vector<RetrievalHead> heads = SummariseRetrieval(tallies);
  EXPECT_DOUBLE_EQ(heads[1].score, 0.0);
  EXPECT_DOUBLE_EQ(heads[1].needle_mass, 1.0);
  // Two sequences: a hit and a miss average to 1/2.
  ASSERT_TRUE(TallyRetrieval(HandBuiltAttention(), kSequence, kNeedleBegin,
                             kNeedleEnd, {{kQuery, 7, 7}}, 0, &tallies)
                  .ok());
  EXPECT_DOUBLE_EQ(SummariseRetrieval(tallies)[1].score, 0.5);
}

// A synthetic-corpus needle: one binding token (0x91, key and value
// together) that the answer "7" never equals. Copy-paste cannot score; the
// needle-value rule scores the head on the binding when the model answers
// right, and not when it answers wrong.
TEST(TallyRetrievalTest, TheNeedleValueRuleScoresAHeadOnABindingToken) {
  std::vector<int32_t> sequence = kSequence;
  sequence[kValueAt] = 0x91;
  const torch::Tensor p = HandBuiltAttention();
  auto score = [&](RetrievalMatch match, int32_t generated) {
    std::vector<HeadTally> tallies;
    EXPECT_TRUE(TallyRetrieval(p, sequence, kNeedleBegin, kNeedleEnd,
                               {{kQuery, generated, 7}}, 0, &tallies, match)
                    .ok());
    return SummariseRetrieval(tallies);
  };
  EXPECT_EQ(score(RetrievalMatch::kCopiedToken, 7)[1].score, 0.0);
  const auto right = score(RetrievalMatch::kNeedleValue, 7);
  EXPECT_EQ(right[1].score, 1.0);
  EXPECT_EQ(right[0].score, 0.0);  // top-1 outside the needle
  EXPECT_EQ(right[2].score, 0.0);
  EXPECT_EQ(score(RetrievalMatch::kNeedleValue, 8)[1].score, 0.0);
}

TEST(TallyRetrievalTest, BadInputIsNamed) {
  std::vector<HeadTally> tallies;
  auto message = [&](const torch::Tensor& p, int64_t begin, int64_t end,
                     int64_t query) {
    std::vector<HeadTally> t;
    absl::Status s =
        TallyRetrieval(p, kSequence, begin, end, {{query, 7, 7}}, 0, &t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  const torch::Tensor p = HandBuiltAttention();
  EXPECT_NE(message(p, 4, 4, kQuery).find("needle span [4, 4)"),
            std::string::npos);
  EXPECT_NE(message(p, 4, 13, kQuery).find("outside"), std::string::npos);
  EXPECT_NE(message(p, 4, 8, 12).find("query 12"), std::string::npos);
  EXPECT_NE(message(p.narrow(1, 0, 5), 4, 8, kQuery).find("must be (H, 12"),
            std::string::npos);
}

// Two layers, SWA(8) then full attention, over the byte vocabulary.
model::ModelConfig TinyConfig(const std::string& architecture) {
  model::ModelConfig c;
  c.vocab_size = 258;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_hidden = 64;
  c.layers = *model::ExpandArchitecture(architecture, c.n_layers);
  return c;
}

TEST(TraceRetrievalHeadsTest, TracesEveryFullAttentionHead) {
  torch::manual_seed(3);
  model::HybridLM model(TinyConfig("swa:8,full"));
  const auto tokenizer = data::MakeByteTokenizer();
  RetrievalHeadsConfig config;
  config.context_length = 64;
  config.samples = 10;
  int64_t last = 0;
  auto result = TraceRetrievalHeads(model, *tokenizer, config,
                                    [&](int64_t done, int64_t n) {
                                      EXPECT_EQ(done, last + 1);
                                      EXPECT_EQ(n, 10);
                                      last = done;
                                    });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(last, 10);
  EXPECT_EQ(result->layers, (std::vector<int64_t>{1}));
  ASSERT_EQ(result->heads.size(), 2u);  // layer 1's two heads
  EXPECT_EQ(result->samples, 10);
  EXPECT_GE(result->copied, 10);  // one or more answer tokens a sample
  for (const RetrievalHead& h : result->heads) {
    EXPECT_EQ(h.layer, 1);
    EXPECT_EQ(h.copied, result->copied);
    EXPECT_GE(h.score, 0);
    EXPECT_LE(h.score, 1);
    EXPECT_GT(h.needle_mass, 0);  // softmax: every key gets some mass
    EXPECT_LT(h.needle_mass, 1);
    EXPECT_GT(h.entropy, 0);
    EXPECT_LE(h.entropy, 1 + 1e-9);
  }
  ASSERT_EQ(result->top.size(), 2u);
  EXPECT_GE(result->heads[static_cast<size_t>(result->top[0])].score,
            result->heads[static_cast<size_t>(result->top[1])].score);
  // The capture is off again, and the same call gives the same numbers.
  EXPECT_FALSE(model->captured_attention(1).defined());
  auto again = TraceRetrievalHeads(model, *tokenizer, config);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again->heads[i].hits, result->heads[i].hits);
    EXPECT_DOUBLE_EQ(again->heads[i].needle_mass, result->heads[i].needle_mass);
  }
}

TEST(TraceRetrievalHeadsTest, BadInputIsNamed) {
  model::HybridLM model(TinyConfig("swa:8,full"));
  const auto tokenizer = data::MakeByteTokenizer();
  auto message = [&](const RetrievalHeadsConfig& c) {
    auto r = TraceRetrievalHeads(model, *tokenizer, c);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  RetrievalHeadsConfig c;
  c.context_length = 4;
  EXPECT_NE(message(c).find("context_length: 4 tokens cannot hold"),
            std::string::npos)
      << message(c);
  c.context_length = 64;
  c.samples = 0;
  EXPECT_NE(message(c).find("samples"), std::string::npos);
  c.samples = 4;
  c.top_heads = 0;
  EXPECT_NE(message(c).find("top_heads"), std::string::npos);
  c.top_heads = 2;
  c.depths = {0.5, -1};
  EXPECT_NE(message(c).find("depths[1]"), std::string::npos);

  model::HybridLM swa(TinyConfig("swa:8"));
  auto none = TraceRetrievalHeads(swa, *tokenizer, RetrievalHeadsConfig{64});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no full-attention layer"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::eval
