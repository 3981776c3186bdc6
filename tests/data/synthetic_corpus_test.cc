#include "data/synthetic_corpus.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hlab::data {
namespace {

SyntheticCorpusConfig LongConfig() {
  return {.seed = 3, .min_length = 2048, .max_length = 4096};
}

TEST(SyntheticCorpusTest, DocumentsAreAPureFunctionOfSeedAndIndex) {
  SyntheticCorpus a(LongConfig()), b(LongConfig());
  for (int64_t i : {0, 1, 17, 123456789}) {
    auto da = a.GetDocument(i);
    auto db = b.GetDocument(i);
    ASSERT_TRUE(da.ok() && db.ok());
    EXPECT_EQ(da->tokens, db->tokens);
    EXPECT_EQ(da->recall_positions, db->recall_positions);
    EXPECT_EQ(static_cast<int64_t>(da->tokens.size()), a.DocumentLength(i));
  }
  EXPECT_NE(a.GetDocument(0)->tokens, a.GetDocument(1)->tokens);
  SyntheticCorpusConfig other = LongConfig();
  other.seed = 4;
  EXPECT_NE(SyntheticCorpus(other).GetDocument(0)->tokens,
            a.GetDocument(0)->tokens);
}

TEST(SyntheticCorpusTest, RecallValuesRepeatTheBindingAtTheStatedDistance) {
  SyntheticCorpus corpus(LongConfig());
  int64_t recalls = 0, shortest = 1 << 30, longest = 0;
  for (int64_t i = 0; i < 50; ++i) {
    auto doc = corpus.GetDocument(i);
    ASSERT_TRUE(doc.ok());
    ASSERT_EQ(doc->recall_positions.size(), doc->recall_distances.size());
    const std::string text(doc->tokens.begin(), doc->tokens.end());
    for (size_t r = 0; r < doc->recall_positions.size(); ++r) {
      const int64_t p = doc->recall_positions[r];
      const int64_t d = doc->recall_distances[r];
      ASSERT_GT(d, 0);
      ASSERT_GE(p - d, 0);
      // "...<C7>. ... C7. ": the recall's key letter and value digit name
      // the binding token d tokens back.
      const int key = doc->tokens[p - 1] - 'A', value = doc->tokens[p] - '0';
      ASSERT_TRUE(key >= 0 && key < kSyntheticKeys) << "document " << i;
      ASSERT_TRUE(value >= 0 && value < kSyntheticValues) << "document " << i;
      EXPECT_EQ(doc->tokens[p - d], BindingToken(key, value))
          << "document " << i << " position " << p;
      ++recalls;
      shortest = std::min(shortest, d);
      longest = std::max(longest, d);
    }
  }
  EXPECT_GT(recalls, 200);
  // Distances span the inside of a small window to beyond a large one.
  EXPECT_LT(shortest, 64);
  EXPECT_GT(longest, 1024);
}

TEST(SyntheticCorpusTest, EveryRecallHasOneAnswerAndNothingElseLooksLikeOne) {
  SyntheticCorpus corpus(LongConfig());
  int64_t bindings = 0;
  for (int64_t i = 0; i < 20; ++i) {
    auto doc = corpus.GetDocument(i);
    ASSERT_TRUE(doc.ok());
    const std::vector<int32_t>& t = doc->tokens;
    std::set<int64_t> recall_keys, binding_tokens;
    for (size_t r = 0; r < doc->recall_positions.size(); ++r) {
      const int64_t p = doc->recall_positions[r];
      const int64_t b = p - doc->recall_distances[r];
      recall_keys.insert(p - 1);
      recall_keys.insert(p);
      binding_tokens.insert(b);
      // No other binding of the same key between the binding and its recall.
      const int key = t[p - 1] - 'A';
      for (int64_t q = b + 1; q < p; ++q) {
        if (t[q] >= kFirstBindingToken) {
          EXPECT_NE((t[q] - kFirstBindingToken) / kSyntheticValues, key)
              << "document " << i << ": key " << key << " bound twice";
        }
      }
    }
    // Binding tokens, key letters and digits occur only in bindings and
    // recalls (a binding whose recall the document cut is still a binding).
    for (size_t q = 0; q < t.size(); ++q) {
      const int32_t x = t[q];
      if (x >= kFirstBindingToken) {
        EXPECT_LT(x,
                  BindingToken(kSyntheticKeys - 1, kSyntheticValues - 1) + 1);
        ++bindings;
        continue;
      }
      const bool special = (x >= 'A' && x <= 'Z') || (x >= '0' && x <= '9');
      // (A recall's key letter may end a document that cut its value.)
      if (special && q + 1 < t.size()) {
        EXPECT_EQ(recall_keys.count(static_cast<int64_t>(q)), 1u)
            << "document " << i << " position " << q;
      }
    }
  }
  EXPECT_GT(bindings, 100);
}

TEST(SyntheticCorpusTest, HeldOutSplitIsDisjointFromTraining) {
  SyntheticCorpusConfig train = {
      .seed = 1, .min_length = 64, .max_length = 256};
  SyntheticCorpusConfig held = train;
  held.split = Split::kHeldOut;
  SyntheticCorpus train_docs(train), held_docs(held);
  std::set<std::vector<int32_t>> seen;
  for (int64_t i = 0; i < 2000; ++i)
    seen.insert(train_docs.GetDocument(i)->tokens);
  for (int64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(seen.count(held_docs.GetDocument(i)->tokens), 0u) << i;
  }
}

// v3's filler: a Zipfian lexicon, so that a model keeps finding rarer words
// and transitions to learn as it grows (the short documents' loss scales
// smoothly). Without bindings a document is filler words only.
TEST(SyntheticCorpusTest, FillerWordsAreZipfianAndCarryNoBinding) {
  SyntheticCorpusConfig c = {.seed = 5, .min_length = 512, .max_length = 512};
  c.binding_rate = 0;
  SyntheticCorpus corpus(c);
  std::map<std::string, int64_t> counts;
  int64_t words = 0;
  for (int64_t i = 0; i < 200; ++i) {
    auto doc = corpus.GetDocument(i);
    ASSERT_TRUE(doc.ok());
    EXPECT_TRUE(doc->recall_positions.empty());
    std::string word;
    for (const int32_t t : doc->tokens) {
      ASSERT_LT(t, kFirstBindingToken) << "document " << i;
      if (t >= 'a' && t <= 'z') {
        word.push_back(static_cast<char>(t));
        continue;
      }
      ASSERT_TRUE(t == ' ' || t == '.') << "document " << i << ": " << t;
      if (!word.empty()) ++counts[word], ++words;
      word.clear();
    }
  }
  std::vector<int64_t> freq;
  for (const auto& [w, n] : counts) freq.push_back(n);
  std::sort(freq.rbegin(), freq.rend());
  // ~20K words: hundreds of distinct ones, the commonest tens of times as
  // frequent as the median one (uniform words would give about 1x).
  EXPECT_GT(words, 15000);
  EXPECT_GT(freq.size(), 500u);
  EXPECT_GT(freq.front(), 20 * freq[freq.size() / 2]);
  EXPECT_GT(freq.front(), words / 100);
}

TEST(SyntheticCorpusTest, BadConfigNamesTheField) {
  SyntheticCorpusConfig c;
  c.max_length = 10;
  c.min_length = 20;
  auto status = ValidateSyntheticCorpusConfig(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("max_length"),
            std::string::npos);
  c = SyntheticCorpusConfig();
  c.binding_rate = 1.5;
  EXPECT_NE(std::string(ValidateSyntheticCorpusConfig(c).message())
                .find("binding_rate"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::data
