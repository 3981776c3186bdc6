// Byte-level tokenizer and the spec factory.
#include "data/tokenizer.h"

#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/sentencepiece_support.h"
#include "gtest/gtest.h"

namespace hlab::data {
namespace {

// This test program loads neither LibTorch nor gRPC (see
// data/sentencepiece_support.h).
const bool kSentencePiece = (EnableSentencePiece(), true);

TEST(ByteTokenizerTest, VocabularyIsTheFixedLayout) {
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  const Vocabulary& vocab = tok->vocabulary();
  EXPECT_EQ(vocab.size, 258);
  EXPECT_EQ(vocab.end_of_document, 256);
  EXPECT_EQ(vocab.pad, 257);
  EXPECT_EQ(vocab.tokenizer, "byte");
  EXPECT_EQ(tok->spec(), "byte");
  EXPECT_EQ(kByteVocabSize, 258);
  EXPECT_EQ(ByteVocabulary().tokenizer, "byte");
  EXPECT_EQ(ByteVocabulary().size, kByteVocabSize);
}

TEST(ByteTokenizerTest, EncodesUtf8BytesAndRoundTrips) {
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  // "é" is two bytes, "€" three, "𝄞" four.
  const std::string text = "h\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E\n";
  std::vector<int32_t> ids = tok->Encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[0], 'h');
  EXPECT_EQ(ids[1], 0xC3);
  EXPECT_EQ(ids[2], 0xA9);
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 256);
  }
  EXPECT_EQ(tok->Decode(ids), text);
  // Invalid UTF-8 round-trips too: bytes are bytes.
  const std::string invalid = "\xFF\xFE\x80";
  EXPECT_EQ(tok->Decode(tok->Encode(invalid)), invalid);
}

TEST(ByteTokenizerTest, DecodesSpecialsAndBadIds) {
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  EXPECT_EQ(tok->Decode({'a', kByteEndOfDocument, 'b', kBytePad, kBytePad}),
            "a\nb");
  EXPECT_EQ(tok->Decode({'a', 999, -1}), "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(MakeTokenizerTest, BuildsByteAndRejectsUnknownSpecs) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> byte = MakeTokenizer("byte");
  ASSERT_TRUE(byte.ok()) << byte.status();
  EXPECT_EQ((*byte)->vocabulary().size, 258);

  for (const char* spec : {"", "bytes", "sentencepiece:", "gpt2:", "bpe:x"}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(spec);
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(MakeTokenizerTest, MissingModelFilesAreNotFoundAndNamed) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> sp =
      MakeTokenizer("sentencepiece:/nonexistent/m.model");
  EXPECT_EQ(sp.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(sp.status().message().find("/nonexistent/m.model"),
            absl::string_view::npos);
  absl::StatusOr<std::unique_ptr<Tokenizer>> gpt2 =
      MakeTokenizer("gpt2:missing", "/nonexistent");
  EXPECT_EQ(gpt2.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(gpt2.status().message().find("/nonexistent/missing/encoder.json"),
            absl::string_view::npos)
      << gpt2.status();
}

}  // namespace
}  // namespace hlab::data
