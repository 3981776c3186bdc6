#include "eval/longppl.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <torch/torch.h>

#include "data/synthetic_corpus.h"
#include "gtest/gtest.h"
#include "model/config/architectures.h"

namespace hlab::eval {
namespace {

constexpr float kRecalled = 0.1f, kForgotten = 5.0f, kOther = 1.0f;

// A scorer with known answers on the synthetic corpus: a recall digit costs
// 0.1 nats when its binding is inside the given context, 5 when it is not;
// every other token costs 1. Scored sequences are slices of one document.
class OracleScorer final : public TokenScorer {
 public:
  explicit OracleScorer(const data::Corpus& docs) : docs_(docs) {}

  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    // Find the document and offset this slice comes from.
    for (int64_t d = 0; d < docs_.num_documents() && d < 64; ++d) {
      const data::Document doc = *docs_.GetDocument(d);
      for (size_t offset = 0; offset + tokens.size() <= doc.tokens.size();
           ++offset) {
        if (!std::equal(tokens.begin(), tokens.end(),
                        doc.tokens.begin() + static_cast<int64_t>(offset))) {
          continue;
        }
        std::map<int64_t, int64_t> distance;
        for (size_t r = 0; r < doc.recall_positions.size(); ++r) {
          distance[doc.recall_positions[r]] = doc.recall_distances[r];
        }
        std::vector<float> nll(tokens.size() - 1, kOther);
        for (size_t i = 1; i < tokens.size(); ++i) {
          auto it = distance.find(static_cast<int64_t>(offset + i));
          if (it == distance.end()) continue;
          nll[i - 1] = static_cast<int64_t>(i) - it->second >= 0 ? kRecalled
                                                                 : kForgotten;
        }
        return nll;
      }
    }
    ADD_FAILURE() << "scored a sequence that is not a document slice";
    return std::vector<float>(tokens.size() - 1, kOther);
  }

 private:
  const data::Corpus& docs_;
};

class LongPplTest : public ::testing::Test {
 protected:
  // Sparse bindings (the v1 corpus's rate), so key tokens are rare and
  // chance precision is low.
  data::SyntheticCorpus docs_{{.seed = 5,
                               .min_length = 600,
                               .max_length = 900,
                               .min_distance = 16,
                               .binding_rate = 0.3,
                               .num_documents = 8}};
  KeyTokenConfig config_{.short_context = 128,
                         .window = 64,
                         .max_tokens = 800,
                         .min_key_tokens = 3};  // 3 of the 8 have 3
};

TEST_F(LongPplTest, SelectsExactlyTheRecallsWhoseBindingIsOutOfShortContext) {
  OracleScorer oracle(docs_);
  auto keys = SelectKeyTokens(oracle, docs_, config_, 8);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->documents.size(), 8u);
  for (const DocumentKeyTokens& doc : keys->documents) {
    // Expected by the definition: p >= K, and the binding lies beyond the
    // context of p's chunk, which starts at the largest multiple of W with
    // start + K <= p.
    const data::Document d = *docs_.GetDocument(doc.document);
    std::vector<int64_t> expected;
    for (size_t r = 0; r < d.recall_positions.size(); ++r) {
      const int64_t p = d.recall_positions[r];
      if (p < config_.short_context || p >= doc.length) continue;
      const int64_t start =
          (p - config_.short_context) / config_.window * config_.window;
      if (d.recall_distances[r] > p - start) expected.push_back(p);
    }
    EXPECT_EQ(doc.positions, expected) << "document " << doc.document;
  }
  auto accuracy = CompareWithRecallPositions(docs_, *keys);
  ASSERT_TRUE(accuracy.ok());
  EXPECT_EQ(accuracy->precision, 1.0);
  EXPECT_GT(accuracy->recall, 0.2);
  EXPECT_LT(accuracy->recall, 1.0);  // near recalls stay in short context
  EXPECT_LT(accuracy->chance, 0.05);
}

TEST_F(LongPplTest, ScoresTheMeanNllOverKeyTokensAndSkipsSparseDocuments) {
  OracleScorer oracle(docs_);
  auto keys = SelectKeyTokens(oracle, docs_, config_, 8);
  ASSERT_TRUE(keys.ok());
  int64_t with_enough = 0, total_keys = 0;
  for (const auto& d : keys->documents) {
    if (static_cast<int64_t>(d.positions.size()) >= config_.min_key_tokens) {
      ++with_enough;
      total_keys += static_cast<int64_t>(d.positions.size());
    }
  }
  ASSERT_GT(with_enough, 0);
  auto result = ScoreLongPpl(oracle, docs_, *keys);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->documents, with_enough);
  EXPECT_EQ(result->documents + result->documents_skipped, 8);
  EXPECT_EQ(result->key_tokens, total_keys);
  EXPECT_NEAR(result->log_longppl, kRecalled, 1e-6);
}

// Two documents of known key-token NLL: 2 key tokens of NLL 1 (not
// recalls) and 4 of 0.1 (recalls, their bindings in the full context).
// Pooled: the mean over the 6; per document: the log of the
// key-token-weighted mean of exp(1) and exp(0.1).
TEST_F(LongPplTest, PoolsKeyTokenNllOrAveragesPerDocumentPerplexities) {
  OracleScorer oracle(docs_);
  KeyTokens keys;
  keys.config = config_;
  keys.config.min_key_tokens = 1;
  const data::Document a = *docs_.GetDocument(0);
  const data::Document b = *docs_.GetDocument(1);
  const int64_t max = keys.config.max_tokens;
  DocumentKeyTokens ka;
  ka.document = 0;
  ka.length = std::min<int64_t>(static_cast<int64_t>(a.tokens.size()), max);
  const std::set<int64_t> recalls(a.recall_positions.begin(),
                                  a.recall_positions.end());
  for (int64_t p = 1; ka.positions.size() < 2; ++p) {
    if (recalls.count(p) == 0) ka.positions.push_back(p);
  }
  DocumentKeyTokens kb;
  kb.document = 1;
  kb.length = std::min<int64_t>(static_cast<int64_t>(b.tokens.size()), max);
  for (int64_t p : b.recall_positions) {
    if (p < kb.length && kb.positions.size() < 4) kb.positions.push_back(p);
  }
  ASSERT_EQ(kb.positions.size(), 4u);
  keys.documents = {ka, kb};
  auto result = ScoreLongPpl(oracle, docs_, keys);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->key_tokens, 6);
  EXPECT_NEAR(result->log_longppl, (2 * kOther + 4 * kRecalled) / 6.0, 1e-6);
  EXPECT_NEAR(result->log_longppl_per_document,
              std::log((2 * std::exp(double{kOther}) +
                        4 * std::exp(double{kRecalled})) /
                       6.0),
              1e-6);
}

TEST_F(LongPplTest, KeyTokensRoundTripThroughTheCacheFormat) {
  OracleScorer oracle(docs_);
  auto keys = SelectKeyTokens(oracle, docs_, config_, 3);
  ASSERT_TRUE(keys.ok());
  auto again = KeyTokensFromJson(KeyTokensToJson(*keys));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(KeyTokensToJson(*again), KeyTokensToJson(*keys));
  EXPECT_EQ(KeyTokensFromJson("{oops").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(LongPplTest, DocumentsShorterThanTheShortContextAreAClearError) {
  data::SyntheticCorpus short_docs(
      {.seed = 1, .min_length = 40, .max_length = 60, .num_documents = 4});
  OracleScorer oracle(short_docs);
  auto keys = SelectKeyTokens(oracle, short_docs, config_, 4);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(keys.status().message()).find("short_context"),
            std::string::npos);
}

TEST(ModelScorerTest, MeanScoreEqualsTheModelLoss) {
  torch::manual_seed(0);
  model::ModelConfig config;
  config.vocab_size = 258;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 2;
  config.n_kv_heads = 1;
  config.head_dim = 16;
  config.ffn_hidden = 64;
  config.layers = *model::ExpandArchitecture("swa-8", 2);
  model::HybridLM lm(config);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 50; ++i) tokens.push_back((i * 37) % 258);
  ModelScorer scorer(lm);
  const std::vector<float> nll = scorer.Score(tokens);
  ASSERT_EQ(nll.size(), 49u);
  double mean = 0;
  for (float v : nll) mean += v;
  mean /= 49;
  torch::Tensor ids = torch::tensor(tokens, torch::kInt64).unsqueeze(0);
  torch::NoGradGuard no_grad;
  const double loss =
      lm->loss(ids.narrow(1, 0, 49), ids.narrow(1, 1, 49)).item<double>();
  EXPECT_NEAR(mean, loss, 1e-5);
}

}  // namespace
}  // namespace hlab::eval
