// Tokenizer::EncodeWithOffsets for every tokenizer: the ids are Encode()'s,
// the spans tile the text, and each byte-level token's span holds its own
// bytes. Known answers where Hugging Face's offset_mapping is known (spaces
// belong to the token after them). GPT-2 and Llama 3 read the shared
// tokenizer files and skip, saying where they looked, when absent.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/internal/document_reader.h"
#include "data/sentencepiece_support.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {
namespace {

using Spans = std::vector<ByteSpan>;

// This test program loads neither LibTorch nor gRPC (see
// data/sentencepiece_support.h).
const bool kSentencePiece = (EnableSentencePiece(), true);

// Texts in several scripts, with digits, runs of spaces and newlines, a
// contraction, a 4-byte character and bytes that are not UTF-8.
std::vector<std::string> Texts() {
  std::vector<std::string> texts = {
      "",
      "Hello world",
      "  leading spaces, it's 12345 apples.\n\n\tTabbed   end  ",
      "h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC"
      "42 \xF0\x9D\x84\x9E!",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87",
      "\xFF\xFE broken \x80 bytes \xC3",
  };
  // Random strings over the same alphabet.
  const std::vector<std::string> alphabet = {"a",
                                             "b",
                                             "Z",
                                             " ",
                                             "  ",
                                             "\n",
                                             "\t",
                                             "7",
                                             "'s",
                                             "\xC3\xA9",
                                             "\xE2\x82\xAC",
                                             "\xE6\x97\xA5",
                                             ".",
                                             ",",
                                             "\xF0\x9F\x98\x80",
                                             "\xCE\xB1\xCE\xB2",
                                             "\x80",
                                             "the",
                                             " of"};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    texts.push_back(text);
  }
  return texts;
}

// The spans are as many as the ids and tile `text`.
void ExpectSpansTile(const EncodedText& encoded, const std::string& text) {
  ASSERT_EQ(encoded.spans.size(), encoded.ids.size()) << text;
  int64_t at = 0;
  for (size_t i = 0; i < encoded.spans.size(); ++i) {
    EXPECT_EQ(encoded.spans[i].begin, at) << "token " << i << " of " << text;
    EXPECT_LE(encoded.spans[i].begin, encoded.spans[i].end) << text;
    at = encoded.spans[i].end;
  }
  EXPECT_EQ(at, static_cast<int64_t>(text.size())) << text;
}

// Texts(), and the first three shared GovReport reports when present
// (13K-47K characters each).
std::vector<std::string> TextsWithReports() {
  std::vector<std::string> texts = Texts();
  const std::string reports =
      testing::SharedDataPath("govreport/gov_reports.jsonl");
  if (reports.empty()) return texts;
  std::vector<internal::RawDocument> docs;
  int64_t skipped = 0;
  const absl::Status read =
      internal::ReadDocuments({reports, "jsonl", 0}, "text", &docs, &skipped);
  EXPECT_TRUE(read.ok()) << read;
  for (size_t i = 0; i < docs.size() && i < 3; ++i) {
    texts.push_back(docs[i].text);
  }
  return texts;
}

// Everything a byte-level tokenizer's offsets promise, over Texts() and
// GovReport.
void CheckByteLevelOffsets(const Tokenizer& tok) {
  const Vocabulary& vocab = tok.vocabulary();
  for (const std::string& text : TextsWithReports()) {
    EncodedText encoded = tok.EncodeWithOffsets(text);
    EXPECT_EQ(encoded.ids, tok.Encode(text)) << text;
    ExpectSpansTile(encoded, text);
    if (encoded.spans.size() != encoded.ids.size()) continue;
    for (size_t i = 0; i < encoded.ids.size(); ++i) {
      const int32_t id = encoded.ids[i];
      if (id == vocab.end_of_document || id == vocab.pad) continue;
      const ByteSpan& span = encoded.spans[i];
      EXPECT_GT(span.end, span.begin) << text;
      EXPECT_EQ(tok.Decode({id}),
                text.substr(span.begin, span.end - span.begin))
          << "token " << i << " (id " << id << ") of " << text;
    }
  }
}

TEST(TokenOffsetsTest, ByteTokensSpanOneByteEach) {
  std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
  EXPECT_EQ(tok->EncodeWithOffsets("h\xC3\xA9").spans,
            (Spans{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_TRUE(tok->EncodeWithOffsets("").spans.empty());
  CheckByteLevelOffsets(*tok);
}

TEST(TokenOffsetsTest, Gpt2SpansHoldTheSpaceBeforeAWord) {
  const std::string dir = testing::SharedDataPath("tokenizers/gpt2");
  if (dir.empty()) {
    GTEST_SKIP() << "GPT-2 files not found under " << testing::SharedDataDir()
                 << "/tokenizers/gpt2 (set HLAB_SHARED_DIR)";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer("gpt2:" + dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // Hugging Face's offset_mapping for GPT-2 on this text, in bytes.
  EncodedText encoded = (*tok)->EncodeWithOffsets("Hello world");
  EXPECT_EQ(encoded.ids, (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(encoded.spans, (Spans{{0, 5}, {5, 11}}));
  // <|endoftext|> in text is text, spanned like any other.
  encoded = (*tok)->EncodeWithOffsets("a<|endoftext|>");
  ExpectSpansTile(encoded, "a<|endoftext|>");
  CheckByteLevelOffsets(**tok);
}

TEST(TokenOffsetsTest, Llama3SpansMatchHuggingFacesOffsetMapping) {
  const std::string dir = testing::SharedDataPath("tokenizers/llama3");
  if (dir.empty()) {
    GTEST_SKIP() << "Llama 3 tokenizer not found under "
                 << testing::SharedDataDir()
                 << "/tokenizers/llama3 (set HLAB_SHARED_DIR)";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer("hf:" + dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EncodedText encoded = (*tok)->EncodeWithOffsets("Hello world");
  EXPECT_EQ(encoded.ids, (std::vector<int32_t>{9906, 1917}));
  EXPECT_EQ(encoded.spans, (Spans{{0, 5}, {5, 11}}));
  // Llama 3 pieces "Hello", " world", "'s", " ", "123", "45".
  encoded = (*tok)->EncodeWithOffsets("Hello world's 12345");
  EXPECT_EQ(encoded.spans,
            (Spans{{0, 5}, {5, 11}, {11, 13}, {13, 14}, {14, 17}, {17, 19}}));
  // An added token written in text is one token over its whole string.
  const std::string with_special = "hi<|eot_id|>there";
  encoded = (*tok)->EncodeWithOffsets(with_special);
  ASSERT_EQ(encoded.ids.size(), 3u);
  EXPECT_EQ(encoded.ids[1], 128009);
  EXPECT_EQ(encoded.spans[1], (ByteSpan{2, 12}));
  ExpectSpansTile(encoded, with_special);
  CheckByteLevelOffsets(**tok);
}

// Generated training text for a small SentencePiece model (ASCII only, so
// that other scripts fall back to byte pieces).
std::vector<std::string> SentencePieceTrainingText() {
  const char* words[] = {"the",   "river", "ran",   "north", "past",
                         "stone", "walls", "where", "birds", "sang",
                         "and",   "light", "fell",  "on",    "water"};
  std::string text;
  uint32_t x = 12345;
  for (int line = 0; line < 2000; ++line) {
    for (int w = 0; w < 12; ++w) {
      x = x * 1664525u + 1013904223u;
      text += words[(x >> 16) % 15];
      text += w == 11 ? ".\n" : " ";
    }
  }
  return {text};
}

TEST(TokenOffsetsTest, SentencePieceSpansTileAndByteFallbackIsOneByteEach) {
  testing::ScratchDir dir;
  SentencePieceTrainOptions options;
  options.vocab_size = 320;
  ASSERT_TRUE(
      TrainSentencePiece(SentencePieceTrainingText(), options, dir / "m.model")
          .ok());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("sentencepiece:" + (dir / "m.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const std::string& text : Texts()) {
    EncodedText encoded = (*tok)->EncodeWithOffsets(text);
    EXPECT_EQ(encoded.ids, (*tok)->Encode(text)) << text;
    ExpectSpansTile(encoded, text);
  }
  // "é" (2 bytes) and "€" (3) are not pieces: byte pieces, one byte each,
  // which decode together to the text.
  const std::string text = "the \xC3\xA9\xE2\x82\xAC river";
  EncodedText encoded = (*tok)->EncodeWithOffsets(text);
  ExpectSpansTile(encoded, text);
  int one_byte_spans = 0;
  for (size_t i = 0; i < encoded.spans.size(); ++i) {
    const ByteSpan& span = encoded.spans[i];
    if (span.begin >= 4 && span.end <= 9) {
      EXPECT_EQ(span.end - span.begin, 1) << "token " << i;
      ++one_byte_spans;
    }
  }
  EXPECT_EQ(one_byte_spans, 5);
  // Each prefix of the tokens decodes to the text up to its last span
  // (the model is lossless), at character boundaries.
  for (size_t k = 1; k <= encoded.ids.size(); ++k) {
    const int64_t end = encoded.spans[k - 1].end;
    if (end > 4 && end < 9) continue;  // inside the byte-fallback run
    std::vector<int32_t> prefix(encoded.ids.begin(), encoded.ids.begin() + k);
    EXPECT_EQ((*tok)->Decode(prefix), text.substr(0, end)) << "k = " << k;
  }
}

}  // namespace
}  // namespace hlab::data
