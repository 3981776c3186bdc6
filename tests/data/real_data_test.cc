// Preparing the shared real data: the C4 samples (short documents) and the
// GovReport reports (long documents). Skipped when the data is absent.
#include <set>
#include <string>

#include "data/import.h"
#include "data/shard_corpus.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

class RealDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c4_ = testing::SharedDataPath("c4");
    govreport_ = testing::SharedDataPath("govreport/gov_reports.jsonl");
    if (c4_.empty() || govreport_.empty()) {
      GTEST_SKIP() << "C4/GovReport samples not found under "
                   << testing::SharedDataDir() << "; set HLAB_SHARED_DIR";
    }
  }
  std::string c4_;
  std::string govreport_;
};

TEST_F(RealDataTest, PreparesC4AsShortAndGovReportAsLongDocuments) {
  testing::ScratchDir dir;
  PrepareOptions options;
  options.inputs = {c4_};
  options.output_dir = dir / "c4";
  // The DualGuard sample splits each document into prompt + response.
  options.text_field = "text,prompt+response";
  options.held_out_fraction = 0.1;
  absl::StatusOr<Manifest> c4 = PrepareDataset(options);
  ASSERT_TRUE(c4.ok()) << c4.status();
  // 30 OLMo samples + 10 Guardian + 200 DualGuard documents.
  EXPECT_EQ(c4->train.num_documents + c4->heldout.num_documents, 240);
  EXPECT_EQ(c4->sources.size(), 5u);
  EXPECT_GT(c4->heldout.num_documents, 5);

  options.inputs = {govreport_};
  options.output_dir = dir / "govreport";
  options.text_field = "text";
  options.held_out_fraction = 0;
  absl::StatusOr<Manifest> gov = PrepareDataset(options);
  ASSERT_TRUE(gov.ok()) << gov.status();
  EXPECT_EQ(gov->train.num_documents, 10);

  absl::StatusOr<std::unique_ptr<ShardCorpus>> long_docs =
      ShardCorpus::Open(dir / "govreport");
  absl::StatusOr<std::unique_ptr<ShardCorpus>> short_docs =
      ShardCorpus::Open(dir / "c4");
  ASSERT_TRUE(long_docs.ok()) << long_docs.status();
  ASSERT_TRUE(short_docs.ok()) << short_docs.status();
  // GovReport reports are 13K-88K characters; the C4 samples far shorter.
  for (int64_t i = 0; i < (*long_docs)->num_documents(); ++i) {
    EXPECT_GE((*long_docs)->DocumentLength(i), 10000) << i;
  }
  int64_t short_count = 0;
  for (int64_t i = 0; i < (*short_docs)->num_documents(); ++i) {
    short_count += (*short_docs)->DocumentLength(i) < 4096 ? 1 : 0;
  }
  EXPECT_GT(short_count, (*short_docs)->num_documents() * 9 / 10);
  EXPECT_EQ((*long_docs)->vocabulary().tokenizer,
            (*short_docs)->vocabulary().tokenizer);

  // The first GovReport document decodes back to its text's opening.
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  absl::StatusOr<Document> doc = (*long_docs)->GetDocument(0);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(tok->Decode(doc->tokens).substr(0, 30),
            testing::ReadFile(govreport_).substr(10, 30));
}

TEST_F(RealDataTest, PreparesWithGpt2WhenItsFilesArePresent) {
  std::string gpt2 = testing::SharedDataPath("tokenizers/gpt2");
  if (gpt2.empty()) GTEST_SKIP() << "GPT-2 files absent";
  testing::ScratchDir dir;
  PrepareOptions options;
  options.inputs = {c4_ + "/olmo_c4-sample.01.json.gz"};
  options.output_dir = dir / "out";
  options.tokenizer = "gpt2:" + gpt2;
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->tokenizer_spec, "gpt2:gpt2");  // the dataset's copy
  EXPECT_EQ(manifest->vocabulary.size, 50257);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer(manifest->tokenizer_spec, dir / "out");
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir / "out");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  absl::StatusOr<Document> doc = (*corpus)->GetDocument(0);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ((*tok)->Decode(doc->tokens).substr(0, 20), "The woman who died a");
}

}  // namespace
}  // namespace hlab::data
