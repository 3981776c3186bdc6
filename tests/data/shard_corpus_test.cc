// ShardCorpus: reading prepared shards back, and refusing corrupt or missing
// ones with an error that names the file.
#include "data/shard_corpus.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/import.h"
#include "data/internal/files.h"
#include "data/internal/shard_writer.h"
#include "data/shard_format.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

namespace fs = std::filesystem;

// Prepares 30 documents of growing length into `dir`/out, 3+ shards.
std::vector<std::string> PrepareSmall(const testing::ScratchDir& dir) {
  std::vector<std::string> texts;
  std::string jsonl;
  for (int i = 0; i < 30; ++i) {
    texts.push_back(absl::StrCat("document ", i, " ",
                                 std::string(static_cast<size_t>(3 * i), 'z')));
    jsonl += absl::StrCat("{\"text\": \"", texts.back(), "\"}\n");
  }
  testing::WriteFile(dir / "a.jsonl", jsonl);
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  options.shard_tokens = 300;
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_GE(manifest->train.shards.size(), 3u);
  return texts;
}

TEST(ShardCorpusTest, ReadsDocumentsInInputOrder) {
  testing::ScratchDir dir;
  std::vector<std::string> texts = PrepareSmall(dir);
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir / "out");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ((*corpus)->num_documents(), 30);
  EXPECT_EQ((*corpus)->vocabulary().size, 258);
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  for (int64_t i = 0; i < 30; ++i) {
    absl::StatusOr<Document> doc = (*corpus)->GetDocument(i);
    ASSERT_TRUE(doc.ok()) << doc.status();
    EXPECT_EQ(tok->Decode(doc->tokens), texts[static_cast<size_t>(i)]);
    EXPECT_EQ((*corpus)->DocumentLength(i),
              static_cast<int64_t>(texts[static_cast<size_t>(i)].size()));
    EXPECT_TRUE(doc->recall_positions.empty());
  }
  EXPECT_EQ((*corpus)->GetDocument(30).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*corpus)->GetDocument(-1).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*corpus)->DocumentLength(30), 0);

  absl::StatusOr<std::unique_ptr<ShardCorpus>> heldout =
      ShardCorpus::Open(dir / "out", kHeldOutSplit);
  ASSERT_TRUE(heldout.ok()) << heldout.status();
  EXPECT_EQ((*heldout)->num_documents(), 0);
  EXPECT_EQ(ShardCorpus::Open(dir / "out", "validation").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardCorpusTest, FlippedByteIsDataLossNamingTheShard) {
  testing::ScratchDir dir;
  PrepareSmall(dir);
  std::string shard = dir / "out/train-00001.tokens";
  std::string bytes = testing::ReadFile(shard);
  bytes[bytes.size() / 2] ^= 0x01;
  testing::WriteFile(shard, bytes);
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir / "out");
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(corpus.status().message().find(shard), absl::string_view::npos)
      << corpus.status();
  EXPECT_NE(corpus.status().message().find("data prepare"),
            absl::string_view::npos);
  absl::Status verify = VerifyDataset(dir / "out");
  EXPECT_EQ(verify.code(), absl::StatusCode::kDataLoss);

  // Without checksum verification the same-size file opens.
  ShardCorpusOptions options;
  options.verify_checksums = false;
  EXPECT_TRUE(ShardCorpus::Open(dir / "out", kTrainSplit, options).ok());
}

TEST(ShardCorpusTest, TruncatedIndexIsDataLossNamingIt) {
  testing::ScratchDir dir;
  PrepareSmall(dir);
  std::string index = dir / "out/train-00000.index";
  std::string bytes = testing::ReadFile(index);
  testing::WriteFile(index, bytes.substr(0, bytes.size() - 8));
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir / "out");
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(corpus.status().message().find(index), absl::string_view::npos)
      << corpus.status();
}

TEST(ShardCorpusTest, MissingShardIsNotFoundNamingIt) {
  testing::ScratchDir dir;
  PrepareSmall(dir);
  std::string shard = dir / "out/train-00002.tokens";
  fs::remove(shard);
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir / "out");
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(corpus.status().message().find(shard), absl::string_view::npos)
      << corpus.status();
}

TEST(ShardCorpusTest, MissingOrBrokenManifest) {
  testing::ScratchDir dir;
  absl::StatusOr<std::unique_ptr<ShardCorpus>> none =
      ShardCorpus::Open(dir / "nothing");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("data prepare"),
            absl::string_view::npos);
  testing::WriteFile(dir / "bad/manifest.json", "{\"format_version\": 1}");
  absl::StatusOr<std::unique_ptr<ShardCorpus>> bad =
      ShardCorpus::Open(dir / "bad");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(dir / "bad/manifest.json"),
            absl::string_view::npos);
}

// Vocabularies over 65536 ids are stored as uint32.
// Counts that are floats or out of range are DataLoss, not converted
// undefined (tests/fuzz/fuzz_shard_manifest.cc).
TEST(ShardCorpusTest, ManifestCountsMustBeIntegers) {
  const std::string text = R"({"format_version": 1.5e300})";
  absl::StatusOr<Manifest> m = ParseManifest(text, "m.json");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(m.status().message()).find("format_version is not an"),
            std::string::npos)
      << m.status();
}

TEST(ShardCorpusTest, ReadsUint32Tokens) {
  testing::ScratchDir dir;
  Manifest manifest;
  manifest.tokenizer_spec = "test";
  manifest.vocabulary = {100000, 99999, 99998, "test"};
  manifest.token_type = TokenTypeFor(manifest.vocabulary.size);
  ASSERT_EQ(manifest.token_type, "uint32");
  internal::ShardWriter writer(dir.path(), kTrainSplit, 4, 1000);
  ASSERT_TRUE(writer.Add({70000, 1, 99999}).ok());
  ASSERT_TRUE(writer.Add({65536}).ok());
  ASSERT_TRUE(writer.Finish(&manifest.train).ok());
  ASSERT_TRUE(internal::WriteStringToFile(dir / "manifest.json",
                                          ManifestToJson(manifest))
                  .ok());
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir.path());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ((*corpus)->num_documents(), 2);
  EXPECT_EQ((*corpus)->GetDocument(0)->tokens,
            (std::vector<int32_t>{70000, 1, 99999}));
  EXPECT_EQ((*corpus)->GetDocument(1)->tokens, (std::vector<int32_t>{65536}));
}

}  // namespace
}  // namespace hlab::data
