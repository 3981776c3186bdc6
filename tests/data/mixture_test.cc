#include "data/mixture.h"

#include "data/byte_tokenizer.h"
#include "data/synthetic_corpus.h"
#include "gtest/gtest.h"

namespace hlab::data {
namespace {

class MixtureTest : public ::testing::Test {
 protected:
  SyntheticCorpus long_docs_{{.seed = 2, .min_length = 257, .max_length = 600}};
  SyntheticCorpus short_docs_{{.seed = 2, .min_length = 16, .max_length = 64}};
};

TEST_F(MixtureTest, SampleIsAPureFunctionOfSeedAndIndex) {
  auto m = SequenceMixture::Create(&long_docs_, &short_docs_,
                                   {.seq_len = 256, .seed = 9});
  ASSERT_TRUE(m.ok());
  for (int64_t k : {0, 5, 1000000}) {
    auto a = m->Sample(k), b = m->Sample(k);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens.size(), 257u);
    EXPECT_EQ(a->tokens, b->tokens);
  }
  EXPECT_NE(m->Sample(0)->tokens, m->Sample(1)->tokens);
  auto other = SequenceMixture::Create(&long_docs_, &short_docs_,
                                       {.seq_len = 256, .seed = 10});
  EXPECT_NE(other->Sample(0)->tokens, m->Sample(0)->tokens);
}

TEST_F(MixtureTest, MixesLongAndShortByTokensInTheGivenRatio) {
  for (double fraction : {0.5, 0.25}) {
    auto m = SequenceMixture::Create(
        &long_docs_, &short_docs_,
        {.seq_len = 128, .long_fraction = fraction, .seed = 1});
    ASSERT_TRUE(m.ok());
    int64_t long_count = 0;
    constexpr int64_t kSamples = 4000;
    for (int64_t k = 0; k < kSamples; ++k)
      long_count += m->Sample(k)->long_kind;
    EXPECT_NEAR(static_cast<double>(long_count) / kSamples, fraction, 0.03);
  }
}

TEST_F(MixtureTest, PacksShortDocumentsWithSeparatorsAndKeepsRecallTargets) {
  auto m = SequenceMixture::Create(&long_docs_, &short_docs_,
                                   {.seq_len = 256, .seed = 4});
  ASSERT_TRUE(m.ok());
  int64_t recalls = 0;
  for (int64_t k = 0; k < 200; ++k) {
    auto s = m->Sample(k);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->tokens[0], kByteEndOfDocument);
    int64_t separators = 0;
    for (int32_t t : s->tokens) separators += t == kByteEndOfDocument;
    if (s->long_kind) {
      EXPECT_EQ(separators, 1);  // one long document fills the sequence
    } else {
      EXPECT_GT(separators, 2);
    }
    for (size_t r = 0; r < s->recall_targets.size(); ++r) {
      const int64_t t = s->recall_targets[r] + 1;  // token index
      ASSERT_GE(t - s->recall_distances[r], 1);
      // "<C7>. ... C7. ": the key letter and value name the binding token.
      EXPECT_EQ(s->tokens[t - s->recall_distances[r]],
                data::BindingToken(s->tokens[t - 1] - 'A', s->tokens[t] - '0'));
      ++recalls;
    }
  }
  EXPECT_GT(recalls, 50);
}

TEST_F(MixtureTest, MissingCorpusForANonZeroFractionIsAnError) {
  auto m = SequenceMixture::Create(nullptr, &short_docs_,
                                   {.seq_len = 64, .long_fraction = 0.5});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  auto only_short = SequenceMixture::Create(
      nullptr, &short_docs_, {.seq_len = 64, .long_fraction = 0.0});
  EXPECT_TRUE(only_short.ok());
  auto bad = SequenceMixture::Create(&long_docs_, &short_docs_,
                                     {.seq_len = 64, .long_fraction = 2});
  EXPECT_NE(std::string(bad.status().message()).find("long_fraction"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::data
