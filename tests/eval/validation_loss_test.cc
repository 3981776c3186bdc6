#include "eval/validation_loss.h"

#include <map>

#include <torch/torch.h>

#include "data/mixture.h"
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "model/config/architectures.h"

namespace hlab::eval {
namespace {

// Known answers: the NLL of predicting token t is t / 100 nats. Records the
// batch sizes it was called with.
class TokenValueScorer final : public TokenScorer {
 public:
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    std::vector<float> nll;
    for (size_t i = 1; i < tokens.size(); ++i) nll.push_back(tokens[i] / 100.f);
    return nll;
  }
  std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) override {
    batches.push_back(static_cast<int64_t>(sequences.size()));
    return TokenScorer::ScoreBatch(sequences);
  }
  std::vector<int64_t> batches;
};

// Documents given in memory.
class VectorCorpus final : public data::Corpus {
 public:
  explicit VectorCorpus(std::vector<std::vector<int32_t>> docs)
      : docs_(std::move(docs)), vocabulary_(data::ByteVocabulary()) {}
  int64_t num_documents() const override {
    return static_cast<int64_t>(docs_.size());
  }
  const data::Vocabulary& vocabulary() const override { return vocabulary_; }
  int64_t DocumentLength(int64_t i) const override {
    return static_cast<int64_t>(docs_[static_cast<size_t>(i)].size());
  }
  absl::StatusOr<data::Document> GetDocument(int64_t i) const override {
    data::Document doc;
    doc.tokens = docs_[static_cast<size_t>(i)];
    return doc;
  }

 private:
  std::vector<std::vector<int32_t>> docs_;
  data::Vocabulary vocabulary_;
};

TEST(CorpusValidationLossTest, ScoresEveryTokenOfEveryDocumentOnce) {
  std::vector<int32_t> a = {10, 20, 30, 40, 50};  // 5 predictions
  std::vector<int32_t> b;
  for (int i = 0; i < 300; ++i) b.push_back(i % 200);  // 300: 3 windows
  VectorCorpus docs({a, {}, b});
  TokenValueScorer scorer;
  auto r = CorpusValidationLoss(scorer, docs, 128,
                                {.tokens = 0, .batch_sequences = 3});
  ASSERT_TRUE(r.ok()) << r.status();
  double sum = 0;
  for (int32_t t : a) sum += t / 100.0;
  for (int32_t t : b) sum += t / 100.0;
  EXPECT_EQ(r->tokens, 305);
  EXPECT_EQ(r->documents, 2);  // the empty one has nothing to score
  EXPECT_EQ(r->sequences, 4);  // 1 + ceil(300 / 128)
  EXPECT_NEAR(r->loss, sum / 305, 1e-6);
  EXPECT_EQ(scorer.batches, (std::vector<int64_t>{3, 1}));
}

TEST(CorpusValidationLossTest, StopsAtTheTokenBudgetInWholeWindows) {
  std::vector<int32_t> doc(1000, 7);
  VectorCorpus docs({doc, doc, doc});
  TokenValueScorer scorer;
  auto r = CorpusValidationLoss(scorer, docs, 100,
                                {.tokens = 250, .batch_sequences = 8});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tokens, 300);  // three windows of 100 reach 250
  EXPECT_EQ(r->documents, 1);
  // The first window predicts the document's first token after the
  // separator: all targets are 7.
  EXPECT_NEAR(r->loss, 0.07, 1e-6);
}

TEST(CorpusValidationLossTest, AnEmptyCorpusIsAClearError) {
  VectorCorpus docs({{}, {}});
  TokenValueScorer scorer;
  auto r = CorpusValidationLoss(scorer, docs, 16, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CorpusValidationLoss(scorer, docs, 16, {.batch_sequences = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MixtureValidationLossTest, ScoresWholeSequencesOfTheHeldOutMixture) {
  data::SyntheticCorpus long_docs({.seed = 1,
                                   .split = data::Split::kHeldOut,
                                   .min_length = 65,
                                   .max_length = 128});
  data::SyntheticCorpus short_docs({.seed = 1,
                                    .split = data::Split::kHeldOut,
                                    .min_length = 8,
                                    .max_length = 16});
  auto mixture = data::SequenceMixture::Create(
      &long_docs, &short_docs,
      {.seq_len = 64, .long_fraction = 0.5, .seed = 3});
  ASSERT_TRUE(mixture.ok());
  TokenValueScorer scorer;
  auto r = MixtureValidationLoss(scorer, *mixture,
                                 {.tokens = 1000, .batch_sequences = 4});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequences, 16);  // ceil(1000 / 64)
  EXPECT_EQ(r->tokens, 16 * 64);
  // The same sums, computed directly from the samples.
  double sum = 0;
  int64_t documents = 0;
  for (int64_t k = 0; k < 16; ++k) {
    const auto s = *mixture->Sample(k);
    for (size_t i = 1; i < s.tokens.size(); ++i) sum += s.tokens[i] / 100.0;
    int64_t starts = 0;
    for (size_t i = 0; i + 1 < s.tokens.size(); ++i) {
      starts += s.tokens[i] == mixture->vocabulary().end_of_document;
    }
    documents += std::max<int64_t>(starts, 1);
  }
  EXPECT_NEAR(r->loss, sum / (16 * 64), 1e-6);
  EXPECT_EQ(r->documents, documents);
  EXPECT_GT(r->documents, 16);  // short sequences pack several documents
  EXPECT_EQ(scorer.batches, (std::vector<int64_t>{4, 4, 4, 4}));
}

TEST(ModelScorerTest, BatchedScoresEqualOneSequenceAtATime) {
  torch::manual_seed(0);
  for (const char* arch : {"full", "swa-8", "lightning", "mamba2", "gdn"}) {
    model::ModelConfig config;
    config.vocab_size = 258;
    config.d_model = 32;
    config.n_layers = 2;
    config.n_heads = 2;
    config.n_kv_heads = 1;
    config.head_dim = 16;
    config.ffn_hidden = 64;
    config.layers = *model::ExpandArchitecture(arch, 2);
    for (model::MixerSpec& layer : config.layers) {
      if (layer.kind == model::MixerKind::kMamba2) layer.ssm_head_dim = 16;
    }
    const absl::Status valid = model::ValidateModelConfig(config);
    ASSERT_TRUE(valid.ok()) << arch << ": " << valid;
    ModelScorer scorer{model::HybridLM(config)};
    std::vector<std::vector<int32_t>> seqs = {{}, {}, {}};
    for (int i = 0; i < 70; ++i) seqs[0].push_back((i * 37) % 258);
    for (int i = 0; i < 41; ++i) seqs[1].push_back((i * 11 + 5) % 258);
    seqs[2] = {3, 4};
    const auto batched = scorer.ScoreBatch(seqs);
    ASSERT_EQ(batched.size(), 3u);
    for (size_t s = 0; s < seqs.size(); ++s) {
      const std::vector<float> alone = scorer.Score(seqs[s]);
      ASSERT_EQ(batched[s].size(), alone.size()) << arch;
      for (size_t i = 0; i < alone.size(); ++i) {
        EXPECT_NEAR(batched[s][i], alone[i], 1e-4) << arch << " seq " << s;
      }
    }
  }
}

}  // namespace
}  // namespace hlab::eval
