// SentencePiece: train a small model (on the shared novel, or generated text
// when it is absent), load it, round-trip text.
#include "data/sentencepiece_tokenizer.h"

#include <string>
#include <vector>

#include "data/sentencepiece_support.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

// This test program loads neither LibTorch nor gRPC (see
// data/sentencepiece_support.h).
const bool kSentencePiece = (EnableSentencePiece(), true);

// Training text: the novel when present, else generated sentences.
std::vector<std::string> TrainingTexts() {
  std::string novel =
      testing::SharedDataPath("gutenberg/frankenstein_pg84.txt");
  if (!novel.empty()) return {testing::ReadFile(novel).substr(0, 200000)};
  const char* words[] = {"the",   "river", "ran",   "north", "past",
                         "stone", "walls", "where", "birds", "sang",
                         "and",   "light", "fell",  "on",    "water"};
  std::string text;
  uint32_t x = 12345;
  for (int line = 0; line < 3000; ++line) {
    for (int w = 0; w < 12; ++w) {
      x = x * 1664525u + 1013904223u;
      text += words[(x >> 16) % 15];
      text += w == 11 ? ".\n" : " ";
    }
  }
  return {text};
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScratchDir;
    SentencePieceTrainOptions options;
    options.vocab_size = 500;
    status_ = new absl::Status(
        TrainSentencePiece(TrainingTexts(), options, *dir_ / "m.model"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete status_;
  }
  void SetUp() override {
    ASSERT_TRUE(status_->ok()) << *status_;
    absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok =
        SentencePieceTokenizer::Load(*dir_ / "m.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(tok).value();
  }
  static testing::ScratchDir* dir_;
  static absl::Status* status_;
  std::unique_ptr<SentencePieceTokenizer> tok_;
};

testing::ScratchDir* SentencePieceTokenizerTest::dir_ = nullptr;
absl::Status* SentencePieceTokenizerTest::status_ = nullptr;

TEST_F(SentencePieceTokenizerTest, VocabularyHasPadAndEos) {
  const Vocabulary& vocab = tok_->vocabulary();
  // At most the requested 500 (fewer when the generated fallback text has
  // too few distinct pieces), more than the 256 bytes and 4 specials.
  EXPECT_LE(vocab.size, 500);
  EXPECT_GT(vocab.size, 300);
  EXPECT_EQ(vocab.pad, 0);
  EXPECT_EQ(vocab.end_of_document, 3);
  EXPECT_EQ(vocab.tokenizer.rfind("sentencepiece:", 0), 0u);
  EXPECT_EQ(vocab.tokenizer.size(), std::string("sentencepiece:").size() + 16);
  EXPECT_EQ(tok_->spec(), "sentencepiece:" + (*dir_ / "m.model"));
}

TEST_F(SentencePieceTokenizerTest, RoundTripsTextLosslessly) {
  const std::string text =
      "The river ran north.\n\n  Two  spaces, tabs\tand caf\xC3\xA9 "
      "\xE2\x82\xAC 42 \xF0\x9F\x98\x80 end.\n";
  std::vector<int32_t> ids = tok_->Encode(text);
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, tok_->vocabulary().size);
  }
  // Fewer tokens than bytes: the model learned merges.
  EXPECT_LT(tok_->Encode("the the the the the the").size(), 23u);
  EXPECT_EQ(tok_->Decode(ids), text);
}

TEST_F(SentencePieceTokenizerTest, DecodesSpecials) {
  std::vector<int32_t> a = tok_->Encode("north");
  std::vector<int32_t> ids = a;
  ids.push_back(3);  // eos
  ids.push_back(0);  // pad
  ids.insert(ids.end(), a.begin(), a.end());
  EXPECT_EQ(tok_->Decode(ids), "north\nnorth");
}

TEST_F(SentencePieceTokenizerTest, FactoryGivesTheSameIdentity) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("sentencepiece:m.model", dir_->path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocabulary().tokenizer, tok_->vocabulary().tokenizer);
  EXPECT_EQ((*tok)->Encode("the river"), tok_->Encode("the river"));
}

TEST(SentencePieceLoadTest, GarbageIsDataLossNamingTheFile) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "bad.model", "this is not a protobuf");
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok =
      SentencePieceTokenizer::Load(dir / "bad.model");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(tok.status().message().find(dir / "bad.model"),
            absl::string_view::npos);
}

TEST(SentencePieceTrainTest, RejectsBadOptions) {
  testing::ScratchDir dir;
  SentencePieceTrainOptions options;
  options.model_type = "word-piece";
  EXPECT_EQ(TrainSentencePiece({"some text"}, options, dir / "m.model").code(),
            absl::StatusCode::kInvalidArgument);
  options.model_type = "unigram";
  options.vocab_size = 100;
  EXPECT_EQ(TrainSentencePiece({"some text"}, options, dir / "m.model").code(),
            absl::StatusCode::kInvalidArgument);
  options.vocab_size = 1000;
  EXPECT_EQ(TrainSentencePiece({"", "\n"}, options, dir / "m.model").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hlab::data
