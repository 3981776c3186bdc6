// LengthFilteredCorpus over a small in-memory corpus and a prepared one.
#include "data/length_filtered_corpus.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/import.h"
#include "data/shard_corpus.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

// Document i has lengths[i] tokens, all equal to i.
class VectorCorpus final : public Corpus {
 public:
  explicit VectorCorpus(std::vector<int64_t> lengths)
      : lengths_(std::move(lengths)), vocabulary_(ByteVocabulary()) {}
  int64_t num_documents() const override {
    return static_cast<int64_t>(lengths_.size());
  }
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  int64_t DocumentLength(int64_t i) const override {
    return lengths_[static_cast<size_t>(i)];
  }
  absl::StatusOr<Document> GetDocument(int64_t i) const override {
    Document doc;
    doc.tokens.assign(static_cast<size_t>(lengths_[static_cast<size_t>(i)]),
                      static_cast<int32_t>(i));
    return doc;
  }

 private:
  std::vector<int64_t> lengths_;
  Vocabulary vocabulary_;
};

TEST(LengthFilteredCorpusTest, KeepsDocumentsInTheRangeInOrder) {
  VectorCorpus base({5, 100, 3, 4096, 50, 9000});
  auto long_docs = LengthFilteredCorpus::Create(&base, 100);
  auto short_docs = LengthFilteredCorpus::Create(&base, 1, 100);
  ASSERT_TRUE(long_docs.ok()) << long_docs.status();
  ASSERT_TRUE(short_docs.ok()) << short_docs.status();
  ASSERT_EQ((*long_docs)->num_documents(), 3);
  EXPECT_EQ((*long_docs)->base_index(0), 1);
  EXPECT_EQ((*long_docs)->base_index(2), 5);
  EXPECT_EQ((*long_docs)->DocumentLength(1), 4096);
  EXPECT_EQ((*long_docs)->GetDocument(2)->tokens.front(), 5);
  ASSERT_EQ((*short_docs)->num_documents(), 3);
  EXPECT_EQ((*short_docs)->GetDocument(1)->tokens.size(), 3u);
  EXPECT_EQ((*short_docs)->vocabulary().tokenizer, "byte");
  EXPECT_EQ((*short_docs)->GetDocument(3).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*short_docs)->DocumentLength(-1), 0);
}

TEST(LengthFilteredCorpusTest, RejectsBadRanges) {
  VectorCorpus base({1});
  EXPECT_EQ(LengthFilteredCorpus::Create(nullptr, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LengthFilteredCorpus::Create(&base, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LengthFilteredCorpus::Create(&base, 10, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto empty = LengthFilteredCorpus::Create(&base, 2);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->num_documents(), 0);
}

TEST(LengthFilteredCorpusTest, SplitsAPreparedDatasetByLength) {
  testing::ScratchDir dir;
  std::string jsonl;
  for (int i = 0; i < 20; ++i) {
    jsonl += absl::StrCat("{\"text\": \"",
                          std::string(static_cast<size_t>(10 + 30 * i), 'a'),
                          "\"}\n");
  }
  testing::WriteFile(dir / "a.jsonl", jsonl);
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  ASSERT_TRUE(PrepareDataset(options).ok());
  auto corpus = ShardCorpus::Open(dir / "out");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto long_docs = LengthFilteredCorpus::Create(corpus->get(), 300);
  auto short_docs = LengthFilteredCorpus::Create(corpus->get(), 0, 300);
  ASSERT_TRUE(long_docs.ok() && short_docs.ok());
  // Lengths 10, 40, ..., 580: ten below 300, ten at or above.
  EXPECT_EQ((*long_docs)->num_documents(), 10);
  EXPECT_EQ((*short_docs)->num_documents(), 10);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_GE((*long_docs)->GetDocument(i)->tokens.size(), 300u);
    EXPECT_LT((*short_docs)->GetDocument(i)->tokens.size(), 300u);
  }
}

}  // namespace
}  // namespace hlab::data
