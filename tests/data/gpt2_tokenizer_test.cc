// GPT-2 byte-level BPE: the hand-written pre-tokenizer against the regex's
// behaviour, and encodings of the real vocabulary (skipped when the shared
// files are absent).
#include "data/gpt2_tokenizer.h"

#include <string>
#include <vector>

#include "data/internal/gpt2_pretokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

using ::hlab::data::internal::Gpt2PreTokenize;

std::vector<std::string> Pieces(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view piece : Gpt2PreTokenize(text)) {
    out.emplace_back(piece);
  }
  return out;
}

// Expected pieces worked out from the regex
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
TEST(Gpt2PreTokenizerTest, FollowsTheRegexOnAscii) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Pieces("it's 42 dogs!!"), (V{"it", "'s", " 42", " dogs", "!!"}));
  EXPECT_EQ(Pieces("we'll they're"), (V{"we", "'ll", " they", "'re"}));
  // A whitespace run leaves its last space to the next word.
  EXPECT_EQ(Pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(Pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Pieces("end  "), (V{"end", "  "}));
  EXPECT_EQ(Pieces("x1y"), (V{"x", "1", "y"}));
  EXPECT_EQ(Pieces(" ,.;"), (V{" ,.;"}));
  EXPECT_EQ(Pieces("'x"), (V{"'", "x"}));
}

TEST(Gpt2PreTokenizerTest, UsesUnicodeClasses) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("caf\xC3\xA9 na\xC3\xAFve"),
            (V{"caf\xC3\xA9", " na\xC3\xAFve"}));
  // An em dash (U+2014) is punctuation.
  EXPECT_EQ(Pieces("a\xE2\x80\x94"
                   "b"),
            (V{"a", "\xE2\x80\x94", "b"}));
  // A combining acute accent (U+0301) is a mark, not a letter.
  EXPECT_EQ(Pieces("e\xCC\x81t"), (V{"e", "\xCC\x81", "t"}));
  // Devanagari digits are numbers.
  EXPECT_EQ(Pieces("x\xE0\xA5\xA8\xE0\xA5\xA9"),
            (V{"x", "\xE0\xA5\xA8\xE0\xA5\xA9"}));
  // NBSP is whitespace, but only an ASCII space joins the next word.
  EXPECT_EQ(Pieces("a\xC2\xA0\xC2\xA0"
                   "b"),
            (V{"a", "\xC2\xA0", "\xC2\xA0", "b"}));
}

TEST(Gpt2PreTokenizerTest, PiecesConcatenateToTheText) {
  const std::string text =
      "Mixed: 12,345 items\t\tat $3.50 \xE2\x80\x94 \"quoted\" \xFF\xFE end.\n";
  std::string joined;
  for (absl::string_view piece : Gpt2PreTokenize(text)) {
    EXPECT_FALSE(piece.empty());
    joined += std::string(piece);
  }
  EXPECT_EQ(joined, text);
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SharedDataPath("tokenizers/gpt2");
    if (dir_.empty()) {
      GTEST_SKIP() << "GPT-2 files not found under " << testing::SharedDataDir()
                   << "/tokenizers/gpt2; set HLAB_SHARED_DIR";
    }
    absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tok =
        Gpt2Tokenizer::Load(dir_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(tok).value();
  }
  std::string dir_;
  std::unique_ptr<Gpt2Tokenizer> tok_;
};

TEST_F(Gpt2TokenizerTest, Vocabulary) {
  EXPECT_EQ(tok_->vocabulary().size, 50257);
  EXPECT_EQ(tok_->vocabulary().end_of_document, 50256);
  EXPECT_EQ(tok_->vocabulary().pad, 50256);
  EXPECT_EQ(tok_->vocabulary().tokenizer.rfind("gpt2:", 0), 0u);
}

// Known GPT-2 encodings (as given by the reference tokenizer, e.g.
// tiktoken's "gpt2" encoding): "Hello world" -> [15496, 995], " the" -> 262,
// "The" -> 464, "\n" -> 198, "!" -> 0.
TEST_F(Gpt2TokenizerTest, KnownEncodings) {
  EXPECT_EQ(tok_->Encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok_->Encode(" the"), (std::vector<int32_t>{262}));
  EXPECT_EQ(tok_->Encode("The"), (std::vector<int32_t>{464}));
  EXPECT_EQ(tok_->Encode("\n"), (std::vector<int32_t>{198}));
  EXPECT_EQ(tok_->Encode("!"), (std::vector<int32_t>{0}));
  EXPECT_TRUE(tok_->Encode("").empty());
}

// Expected ids computed with a reference implementation of GPT-2's
// encoder.py (the `regex` module's pattern, the same bpe loop) over the same
// encoder.json and vocab.bpe; they exercise the Unicode classes: an em dash
// (symbol), CJK and full-width punctuation, Cyrillic, an emoji, Devanagari
// digits (\p{N}), a combining accent (not \p{L}), NBSP and ideographic
// space (\s).
TEST_F(Gpt2TokenizerTest, MatchesTheReferenceOnNonAscii) {
  EXPECT_EQ(
      tok_->Encode("It's 3:45pm \xE2\x80\x94 caf\xC3\xA9 na\xC3\xAFve!\n\n"
                   "  Indented"),
      (std::vector<int32_t>{1026, 338, 513, 25, 2231, 4426, 851, 40304, 41492,
                            0, 628, 220, 1423, 4714}));
  EXPECT_EQ(
      tok_->Encode(
          "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95"
          "\x8C\xE3\x80\x82 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5"
          "\xD1\x82 \xF0\x9F\x98\x80 \xE0\xA5\xA8\xE0\xA5\xA9 e\xCC\x81"),
      (std::vector<int32_t>{
          19526, 254,   25001, 121, 171,   120,   234,   10310, 244,   45911,
          234,   16764, 12466, 253, 21169, 18849, 38857, 16843, 20375, 30325,
          222,   220,   24231, 101, 24231, 102,   304,   136,   223}));
  EXPECT_EQ(tok_->Encode(" \xC2\xA0x\xE3\x80\x80y  \n\tz"),
            (std::vector<int32_t>{220, 1849, 87, 5099, 222, 88, 220, 220, 198,
                                  197, 89}));
}

TEST_F(Gpt2TokenizerTest, RoundTripsTextIncludingNonAscii) {
  const std::string text =
      "It's 3:45pm \xE2\x80\x94 caf\xC3\xA9 \xF0\x9F\x98\x80, na\xC3\xAFve!\n\n"
      "  Indented   spaces\tand tabs.";
  std::vector<int32_t> ids = tok_->Encode(text);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 50256);
  }
  EXPECT_EQ(tok_->Decode(ids), text);
  EXPECT_EQ(tok_->Decode({15496, 50256, 995}), "Hello\n world");
}

TEST_F(Gpt2TokenizerTest, FactoryLoadsTheSameTokenizer) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("gpt2:" + dir_);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocabulary().tokenizer, tok_->vocabulary().tokenizer);
  EXPECT_EQ((*tok)->spec(), "gpt2:" + dir_);
}

TEST(Gpt2TokenizerLoadTest, CorruptEncoderIsDataLossNamingTheFile) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "encoder.json", "{not json");
  testing::WriteFile(dir / "vocab.bpe", "#version: 0.2\n");
  absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tok =
      Gpt2Tokenizer::Load(dir.path());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(tok.status().message().find(dir / "encoder.json"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace hlab::data
