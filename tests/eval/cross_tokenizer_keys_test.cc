// eval/cross_tokenizer_keys.h: key tokens a reference of another tokenizer
// selects, passed to the evaluated model as character ranges. Known
// answers: a reference of the model's own tokenizer selects the same
// positions as SelectKeyTokens; a GPT-2 reference whose only key token is
// " cat" marks exactly the bytes of every " cat" after its first K tokens
// (the shared GPT-2 files; skipped without them).
#include "eval/cross_tokenizer_keys.h"

#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/internal/token_corpus.h"
#include "gtest/gtest.h"
#include "tests/data/test_util.h"

namespace hlab::eval {
namespace {

// A reference that needs long context for one token id: it costs 0.1 nats
// in a sequence longer than `short_context` (the full document) and 5 in a
// shorter one (a selection chunk); every other token costs 1.
class OneKeyScorer final : public TokenScorer {
 public:
  OneKeyScorer(int32_t key, size_t short_context)
      : key_(key), short_context_(short_context) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    std::vector<float> nll(tokens.size() - 1, 1.0f);
    for (size_t i = 1; i < tokens.size(); ++i) {
      if (tokens[i] != key_) continue;
      nll[i - 1] = tokens.size() > short_context_ ? 0.1f : 5.0f;
    }
    return nll;
  }

 private:
  int32_t key_;
  size_t short_context_;
};

const char kText[] =
    "A cat sat on the mat, and the cat looked at the dog. The dog saw the "
    "cat. Later the cat slept while a bird sang; the cat woke at noon, and "
    "every cat in town came to see the cat.";

TEST(CrossTokenizerKeysTest, TheModelsOwnTokenizerGivesSelectKeyTokens) {
  auto bytes = data::MakeByteTokenizer();
  internal::TokenCorpus docs(bytes->vocabulary());
  docs.Add(bytes->Encode(kText));
  docs.Add(bytes->Encode(std::string(kText) + " Another cat."));
  const int32_t key = static_cast<int32_t>('c');
  KeyTokenConfig config{
      .short_context = 16, .window = 8, .max_tokens = 150, .min_key_tokens = 1};
  OneKeyScorer a(key, 24), b(key, 24);  // chunks are K + W = 24 long
  auto direct = SelectKeyTokens(a, docs, config, 2);
  ASSERT_TRUE(direct.ok()) << direct.status();
  auto across =
      SelectKeyTokensAcrossTokenizers(b, *bytes, *bytes, docs, config, 2);
  ASSERT_TRUE(across.ok()) << across.status();
  ASSERT_EQ(across->documents.size(), direct->documents.size());
  for (size_t d = 0; d < direct->documents.size(); ++d) {
    EXPECT_EQ(across->documents[d].positions, direct->documents[d].positions);
    EXPECT_EQ(across->documents[d].length, direct->documents[d].length);
    EXPECT_FALSE(across->documents[d].positions.empty());
  }
  EXPECT_EQ(across->candidate_tokens, direct->candidate_tokens);
}

TEST(CrossTokenizerKeysTest, AGpt2ReferenceMarksTheBytesOfItsKeyTokens) {
  const std::string dir = data::testing::SharedDataPath("tokenizers/gpt2");
  if (dir.empty()) {
    GTEST_SKIP() << "needs " << data::testing::SharedDataDir()
                 << "/tokenizers/gpt2; set HLAB_SHARED_DIR";
  }
  auto gpt2 = data::MakeTokenizer("gpt2:" + dir);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  const std::vector<int32_t> cat = (*gpt2)->Encode(" cat");
  ASSERT_EQ(cat.size(), 1u);
  auto bytes = data::MakeByteTokenizer();
  internal::TokenCorpus docs(bytes->vocabulary());
  docs.Add(bytes->Encode(kText));
  const int64_t k = 8;
  KeyTokenConfig config{
      .short_context = k, .window = 4, .max_tokens = 1000, .min_key_tokens = 1};
  OneKeyScorer reference(cat[0], k + 4);
  auto keys = SelectKeyTokensAcrossTokenizers(reference, **gpt2, *bytes, docs,
                                              config, 1);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->documents.size(), 1u);
  // Expected: every byte of each " cat" that starts after GPT-2's first K
  // tokens.
  const data::EncodedText encoded = (*gpt2)->EncodeWithOffsets(kText);
  const int64_t after = encoded.spans[k].begin;
  const std::string text = kText;
  std::vector<int64_t> expected;
  for (size_t at = text.find(" cat"); at != std::string::npos;
       at = text.find(" cat", at + 1)) {
    if (static_cast<int64_t>(at) < after) continue;
    for (int64_t b = 0; b < 4; ++b) expected.push_back(at + b);
  }
  ASSERT_GE(expected.size(), 16u);  // several " cat" after the first K
  EXPECT_EQ(keys->documents[0].positions, expected);
  EXPECT_EQ(keys->documents[0].length, static_cast<int64_t>(text.size()));
  EXPECT_EQ(keys->candidate_tokens, static_cast<int64_t>(text.size()) - after);
}

}  // namespace
}  // namespace hlab::eval
