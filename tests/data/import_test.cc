// PrepareDataset: JSONL (plain and .gz), text files, directories; counts,
// held-out split, determinism, atomic output and errors that name the file.
#include "data/import.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/shard_corpus.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace hlab::data {
namespace {

namespace fs = std::filesystem;

std::string JsonLine(const std::string& text) {
  return nlohmann::json{{"text", text}, {"id", 1}}.dump() + "\n";
}

// `n` distinct documents "doc <i>: ..." as JSONL.
std::string Jsonl(int n, int first = 0) {
  std::string out;
  for (int i = first; i < first + n; ++i) {
    out += JsonLine(absl::StrCat("doc ", i, ": caf\xC3\xA9 ",
                                 std::string(static_cast<size_t>(i % 7), 'x')));
  }
  return out;
}

// All documents of a split, decoded with the byte tokenizer.
std::multiset<std::string> Texts(const std::string& dir,
                                 absl::string_view split) {
  std::multiset<std::string> texts;
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir, split);
  EXPECT_TRUE(corpus.ok()) << corpus.status();
  if (!corpus.ok()) return texts;
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  for (int64_t i = 0; i < (*corpus)->num_documents(); ++i) {
    absl::StatusOr<Document> doc = (*corpus)->GetDocument(i);
    EXPECT_TRUE(doc.ok()) << doc.status();
    texts.insert(tok->Decode(doc->tokens));
  }
  return texts;
}

TEST(PrepareTest, ImportsJsonlGzipTextAndDirectories) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "in/a.jsonl", Jsonl(5, 0));
  testing::WriteGzipFile(dir / "in/b.jsonl.gz", Jsonl(4, 100));
  testing::WriteFile(dir / "in/sub/story.txt", "Once upon a time.\nThe end.");
  testing::WriteFile(dir / "in/sub/.hidden.txt", "never read");
  testing::WriteFile(dir / "in/sub/notes.bin", "not an input extension");
  testing::WriteFile(dir / "single.txt", "A file given by name.");

  PrepareOptions options;
  // in/a.jsonl is named twice (directly and through in/): read once.
  options.inputs = {dir / "in", dir / "single.txt", dir / "in/a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();

  ASSERT_EQ(manifest->sources.size(), 4u);
  EXPECT_EQ(manifest->sources[0].path, dir / "in/a.jsonl");
  EXPECT_EQ(manifest->sources[0].format, "jsonl");
  EXPECT_EQ(manifest->sources[0].num_documents, 5);
  EXPECT_EQ(manifest->sources[1].path, dir / "in/b.jsonl.gz");
  EXPECT_EQ(manifest->sources[1].num_documents, 4);
  EXPECT_EQ(manifest->sources[2].path, dir / "in/sub/story.txt");
  EXPECT_EQ(manifest->sources[2].format, "text");
  EXPECT_EQ(manifest->sources[3].path, dir / "single.txt");
  EXPECT_EQ(manifest->train.num_documents, 11);
  EXPECT_EQ(manifest->heldout.num_documents, 0);
  EXPECT_EQ(manifest->token_type, "uint16");
  EXPECT_EQ(manifest->vocabulary.tokenizer, "byte");

  std::multiset<std::string> texts = Texts(dir / "out", kTrainSplit);
  EXPECT_EQ(texts.count("Once upon a time.\nThe end."), 1u);
  EXPECT_EQ(texts.count("doc 101: caf\xC3\xA9 xxx"), 1u);
  EXPECT_EQ(texts.count("never read"), 0u);

  // The manifest on disk says the same, and its token counts are the sums
  // of the documents.
  absl::StatusOr<Manifest> read = ReadManifest(dir / "out");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(ManifestToJson(*read), ManifestToJson(*manifest));
  int64_t tokens = 0;
  for (const std::string& text : texts)
    tokens += static_cast<int64_t>(text.size());
  EXPECT_EQ(read->train.num_tokens, tokens);
  int64_t shard_tokens = 0;
  for (const ShardInfo& shard : read->train.shards) {
    shard_tokens += shard.num_tokens;
    EXPECT_EQ(shard.tokens_bytes, 2 * shard.num_tokens);
    EXPECT_EQ(fs::file_size(dir / ("out/" + shard.tokens_file)),
              static_cast<uintmax_t>(shard.tokens_bytes));
  }
  EXPECT_EQ(shard_tokens, tokens);
  // Nothing temporary is left beside the output.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"),
              std::string::npos);
  }
}

TEST(PrepareTest, SmallShardTargetSplitsIntoShardsAtDocumentBoundaries) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(40));
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  options.shard_tokens = 50;
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_GT(manifest->train.shards.size(), 5u);
  int64_t documents = 0;
  for (const ShardInfo& shard : manifest->train.shards) {
    documents += shard.num_documents;
  }
  EXPECT_EQ(documents, 40);
  EXPECT_EQ(Texts(dir / "out", kTrainSplit).size(), 40u);
}

TEST(PrepareTest, HeldOutDocumentsNeverAppearInTraining) {
  testing::ScratchDir dir;
  // Duplicates must land in the same split.
  testing::WriteFile(dir / "a.jsonl", Jsonl(300) + Jsonl(50));
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0.2;
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->train.num_documents + manifest->heldout.num_documents,
            350);
  // About 20% of 300 distinct texts.
  EXPECT_GT(manifest->heldout.num_documents, 30);
  EXPECT_LT(manifest->heldout.num_documents, 110);
  std::multiset<std::string> train = Texts(dir / "out", kTrainSplit);
  std::multiset<std::string> heldout = Texts(dir / "out", kHeldOutSplit);
  EXPECT_EQ(static_cast<int64_t>(heldout.size()),
            manifest->heldout.num_documents);
  for (const std::string& text : heldout) {
    EXPECT_EQ(train.count(text), 0u) << text;
  }
  // A different seed gives a different split.
  options.split_seed = 7;
  options.output_dir = dir / "out7";
  absl::StatusOr<Manifest> other = PrepareDataset(options);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(Texts(dir / "out7", kHeldOutSplit), heldout);
}

// 12 distinct documents at 1%: for most seeds none scores below 0.01, and
// then the lowest-scoring one (with its duplicate) is held out instead.
TEST(PrepareTest, SmallCorpusStillGetsAHeldOutDocument) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(12) + Jsonl(12));  // duplicated
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.held_out_fraction = 0.01;
  options.shard_tokens = 30;  // several train shards to rewrite
  bool fell_back = false;
  options.progress = [&fell_back](const std::string& line) {
    if (line.find("holding out") != std::string::npos) fell_back = true;
  };
  absl::StatusOr<Manifest> manifest;
  for (options.split_seed = 0; options.split_seed < 20 && !fell_back;
       ++options.split_seed) {
    options.output_dir = dir / absl::StrCat("out", options.split_seed);
    manifest = PrepareDataset(options);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_GE(manifest->heldout.num_documents, 2);  // a document, its copy
  }
  ASSERT_TRUE(fell_back);
  --options.split_seed;
  const std::string out = options.output_dir;
  EXPECT_EQ(manifest->heldout.num_documents, 2);
  EXPECT_EQ(manifest->train.num_documents, 22);
  EXPECT_GT(manifest->train.shards.size(), 2u);
  ASSERT_TRUE(VerifyDataset(out).ok());
  std::multiset<std::string> train = Texts(out, kTrainSplit);
  std::multiset<std::string> heldout = Texts(out, kHeldOutSplit);
  EXPECT_EQ(train.size(), 22u);
  ASSERT_EQ(heldout.size(), 2u);
  EXPECT_EQ(*heldout.begin(), *heldout.rbegin());
  EXPECT_EQ(train.count(*heldout.begin()), 0u);
  // Only train-* and heldout-* shard files and the manifest are left.
  for (const auto& entry : fs::directory_iterator(out)) {
    std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "manifest.json" || name.rfind("train-0", 0) == 0 ||
                name.rfind("heldout-0", 0) == 0)
        << name;
  }
  // Deterministic, like every preparation.
  options.output_dir = dir / "again";
  absl::StatusOr<Manifest> again = PrepareDataset(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ManifestToJson(*again), ManifestToJson(*manifest));
}

TEST(PrepareTest, PreparingTwiceGivesIdenticalChecksums) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(200));
  testing::WriteGzipFile(dir / "b.json.gz", Jsonl(100, 500));
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl", dir / "b.json.gz"};
  options.held_out_fraction = 0.1;
  options.shard_tokens = 400;
  options.output_dir = dir / "one";
  options.threads = 1;
  absl::StatusOr<Manifest> one = PrepareDataset(options);
  options.output_dir = dir / "two";
  options.threads = 4;
  absl::StatusOr<Manifest> two = PrepareDataset(options);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_GT(one->train.shards.size(), 2u);
  EXPECT_EQ(ManifestToJson(*one), ManifestToJson(*two));
  EXPECT_EQ(testing::ReadFile(dir / "one/manifest.json"),
            testing::ReadFile(dir / "two/manifest.json"));
}

TEST(PrepareTest, TextFieldAlternativesAndJoins) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl",
                     "{\"prompt\": \"Hello \", \"response\": \"there\"}\n"
                     "{\"text\": \"plain\"}\n"
                     "{\"text\": \"\"}\n");
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  options.text_field = "text,prompt+response";
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->sources[0].skipped_empty, 1);
  EXPECT_EQ(Texts(dir / "out", kTrainSplit),
            (std::multiset<std::string>{"Hello there", "plain"}));
}

TEST(PrepareErrorTest, BadJsonlLineIsNamedWithItsLineNumber) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(3) + "\n{\"text\": \"ok\"\n");
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(manifest.status().message().find(dir / "a.jsonl:5:"),
            absl::string_view::npos)
      << manifest.status();
  // Nothing is left at the output, not even a temporary directory.
  EXPECT_FALSE(fs::exists(dir / "out"));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"),
              std::string::npos);
  }
}

TEST(PrepareErrorTest, MissingTextFieldIsNamed) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(2) + "{\"body\": \"x\"}\n");
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(manifest.status().message().find(dir / "a.jsonl:3:"),
            absl::string_view::npos)
      << manifest.status();
  EXPECT_NE(manifest.status().message().find("'text'"),
            absl::string_view::npos);
}

TEST(PrepareErrorTest, EmptyCorpusMissingInputCorruptGzip) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "empty.jsonl", "\n{\"text\": \"\"}\n");
  PrepareOptions options;
  options.output_dir = dir / "out";
  options.inputs = {dir / "empty.jsonl"};
  EXPECT_EQ(PrepareDataset(options).status().code(),
            absl::StatusCode::kInvalidArgument);

  options.inputs = {dir / "nope.jsonl"};
  absl::StatusOr<Manifest> missing = PrepareDataset(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir / "nope.jsonl"),
            absl::string_view::npos);

  testing::WriteGzipFile(dir / "full.jsonl.gz", Jsonl(200));
  std::string gz = testing::ReadFile(dir / "full.jsonl.gz");
  testing::WriteFile(dir / "cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  options.inputs = {dir / "cut.jsonl.gz"};
  absl::StatusOr<Manifest> cut = PrepareDataset(options);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss) << cut.status();
  EXPECT_NE(cut.status().message().find(dir / "cut.jsonl.gz"),
            absl::string_view::npos);
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(PrepareErrorTest, ExistingOutputNeedsOverwrite) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(5));
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 0;
  ASSERT_TRUE(PrepareDataset(options).ok());
  EXPECT_EQ(PrepareDataset(options).status().code(),
            absl::StatusCode::kAlreadyExists);
  testing::WriteFile(dir / "a.jsonl", Jsonl(8));
  options.overwrite = true;
  absl::StatusOr<Manifest> again = PrepareDataset(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->train.num_documents, 8);
  EXPECT_EQ(Texts(dir / "out", kTrainSplit).size(), 8u);
}

TEST(PrepareErrorTest, BadOptions) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "a.jsonl", Jsonl(5));
  PrepareOptions options;
  options.inputs = {dir / "a.jsonl"};
  options.output_dir = dir / "out";
  options.held_out_fraction = 1.0;
  EXPECT_EQ(PrepareDataset(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.held_out_fraction = 0;
  options.tokenizer = "wordpiece";
  EXPECT_EQ(PrepareDataset(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir / "out"));
}

}  // namespace
}  // namespace hlab::data
