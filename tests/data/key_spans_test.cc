// Key spans (data/key_spans.h): hlab's JSONL form and PKU-ML/LongPPL's
// slice files read into byte ranges, every bad input refused naming its
// file, document and span, and the cal_overlap mapping onto another
// tokenizer's tokens. The cross-tokenizer test selects key text on byte
// tokens and maps it onto the shared Llama 3 tokenizer (skipped, saying
// where it looked, when absent).
#include "data/key_spans.h"

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace hlab::data {

// Readable failures: "[4, 9)".
void PrintTo(const ByteSpan& span, std::ostream* os) {
  *os << "[" << span.begin << ", " << span.end << ")";
}

namespace {

using Ranges = std::vector<ByteSpan>;
using Indices = std::vector<int64_t>;

// "h é l l o   w ö r l d": é and ö are two bytes each.
constexpr char kAccented[] = "h\xC3\xA9llo w\xC3\xB6rld";

// Expects InvalidArgument whose message holds every one of `parts`.
void ExpectInvalid(const absl::Status& status,
                   const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), absl::string_view::npos)
        << "'" << part << "' not in: " << status.message();
  }
}

absl::Status JsonlStatus(const std::string& contents) {
  return ParseKeySpansJsonl(contents, "keys.jsonl").status();
}

TEST(KeySpansTest, CodePointsBecomeUtf8ByteOffsets) {
  // a (1 byte), é (2), € (3), 😀 (4).
  EXPECT_EQ(CodePointByteOffsets("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            (Indices{0, 1, 3, 6, 10}));
  EXPECT_EQ(CodePointByteOffsets(""), (Indices{0}));
}

TEST(KeySpansTest, ReadsTheJsonlForm) {
  const std::string contents =
      std::string(R"({"id": "doc-a", "text": ")") + kAccented +
      R"(", "key_spans": [[1, 5], [6, 8]], "summary": "ignored"})"
      "\n"
      "\n"  // blank lines are skipped
      R"({"id": 7, "text": "abcdef", "key_spans": [[0, 2], [2, 4]]})"
      "\n"
      R"({"text": "ab", "key_spans": []})"
      "\n" +
      std::string(R"({"text": ")") + kAccented +
      R"(", "offsets": "bytes", "key_spans": [[1, 2]]})"
      "\n";
  absl::StatusOr<std::vector<KeySpanDocument>> docs =
      ParseKeySpansJsonl(contents, "keys.jsonl");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 4u);
  // Characters 1-5 are "éllo" (bytes 1-6), 6-8 "wö" (bytes 7-10).
  EXPECT_EQ((*docs)[0].id, "doc-a");
  EXPECT_EQ((*docs)[0].where, "keys.jsonl:1 (document doc-a)");
  EXPECT_EQ((*docs)[0].key_ranges, (Ranges{{1, 6}, {7, 10}}));
  // Adjacent spans merge; an integer id is its digits.
  EXPECT_EQ((*docs)[1].id, "7");
  EXPECT_EQ((*docs)[1].key_ranges, (Ranges{{0, 4}}));
  // No id: the line; no key spans: no key tokens.
  EXPECT_EQ((*docs)[2].id, "line 4");
  EXPECT_TRUE((*docs)[2].key_ranges.empty());
  // Byte offsets may cut a character (byte tokenizers select bytes).
  EXPECT_EQ((*docs)[3].key_ranges, (Ranges{{1, 2}}));
}

TEST(KeySpansTest, RefusesBadJsonlNamingFileLineDocumentAndSpan) {
  const std::string head = R"({"id": "d", "text": "abcdef", "key_spans": )";
  ExpectInvalid(JsonlStatus(head + "[[2, 9]]}"),
                {"keys.jsonl:1", "document d", "key_spans[0] = [2, 9]",
                 "ends past the text (6 characters)"});
  ExpectInvalid(JsonlStatus(head + "[[4, 2]]}"),
                {"document d", "key_spans[0] = [4, 2]", "reversed"});
  ExpectInvalid(JsonlStatus(head + "[[3, 3]]}"),
                {"key_spans[0] = [3, 3]", "empty"});
  ExpectInvalid(JsonlStatus(head + "[[-1, 3]]}"),
                {"key_spans[0] = [-1, 3]", "negative"});
  ExpectInvalid(JsonlStatus(head + "[[0, 3], [2, 5]]}"),
                {"document d",
                 "key_spans[1] = [2, 5] starts before "
                 "key_spans[0] = [0, 3] ends"});
  ExpectInvalid(JsonlStatus(head + "[[4, 5], [0, 2]]}"),
                {"key_spans[1] = [0, 2] starts before key_spans[0]", "sorted"});
  ExpectInvalid(JsonlStatus(head + "[[1, 2, 3]]}"),
                {"key_spans[0] = [1,2,3] is not a [start, end] pair"});
  ExpectInvalid(JsonlStatus(head + "[[1.5, 2]]}"), {"key_spans[0]"});
  ExpectInvalid(JsonlStatus(head + "{}}"), {"document d", "key_spans"});
  ExpectInvalid(JsonlStatus(R"({"id": "d", "text": "abc"})"),
                {"keys.jsonl:1 (document d)", "no list 'key_spans'"});
  ExpectInvalid(JsonlStatus(R"({"id": "d", "key_spans": []})"),
                {"keys.jsonl:1", "no string field 'text'"});
  ExpectInvalid(JsonlStatus(R"({"id": [1], "text": "a", "key_spans": []})"),
                {"keys.jsonl:1", "'id'"});
  ExpectInvalid(
      JsonlStatus(R"({"text": "a", "offsets": "chars", "key_spans": []})"),
      {"document line 1", "'offsets'"});
  ExpectInvalid(JsonlStatus(R"({"text": "a", "key_spans": []})"
                            "\n[1, 2]\n"),
                {"keys.jsonl:2", "not a JSON object"});
  ExpectInvalid(JsonlStatus("{\"text\": \"a\", \"key_spans\": [}\n"),
                {"keys.jsonl:1", "malformed JSON"});
  ExpectInvalid(JsonlStatus(R"({"id": "x", "text": "a", "key_spans": []})"
                            "\n"
                            R"({"id": "x", "text": "b", "key_spans": []})"),
                {"keys.jsonl:2 (document x)", "line 1", "unique"});
  ExpectInvalid(JsonlStatus(""), {"keys.jsonl: no documents"});
  ExpectInvalid(JsonlStatus("\n  \n"), {"keys.jsonl: no documents"});
}

TEST(KeySpansTest, ReadsSliceLinesAsTheReferenceWritesThem) {
  // "[s, e];[s, e]" in code points; whitespace and a final newline allowed.
  absl::StatusOr<Ranges> ranges =
      ParseLongPplSlice("[1, 5];[6, 8]\n", kAccented, "slice_0.txt");
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_EQ(*ranges, (Ranges{{1, 6}, {7, 10}}));
  // An empty file: no key tokens.
  ranges = ParseLongPplSlice("", kAccented, "slice_0.txt");
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_TRUE(ranges->empty());
  // A character split between two key tokens gives both its offsets: the
  // next range begins one character before the last ends, and they merge.
  ranges = ParseLongPplSlice("[0, 2];[1, 2];[1, 4]", kAccented, "s");
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_EQ(*ranges, (Ranges{{0, 5}}));
}

TEST(KeySpansTest, RefusesBadSliceLinesNamingFileAndRange) {
  auto status = [](const std::string& contents) {
    return ParseLongPplSlice(contents, "abcdef", "dir/slice_3.txt").status();
  };
  ExpectInvalid(status("[0, 2];[4, 9]"), {"dir/slice_3.txt", "range 2 [4, 9]",
                                          "ends past the text (6 characters)"});
  ExpectInvalid(status("[0, 3];[1, 4]"),
                {"range 2 [1, 4] starts before range 1 [0, 3] ends"});
  ExpectInvalid(status("[3, 5];[0, 2]"), {"range 2 [0, 2]", "sorted"});
  ExpectInvalid(status("[3, 3]"), {"range 1 [3, 3]", "empty"});
  ExpectInvalid(status("[0, 2];;[3, 4]"), {"range 2 '' is not [start, end]"});
  ExpectInvalid(status("[0, 2];(3, 4)"), {"range 2 '(3, 4)'"});
  ExpectInvalid(status("[0, x]"), {"range 1 '[0, x]'"});
}

TEST(KeySpansTest, ReadsASliceDirectoryWithItsTexts) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "texts.jsonl",
                     std::string(R"({"text": ")") + kAccented + "\"}\n" +
                         R"({"id": "second", "text": "abcdef"})"
                         "\n" +
                         R"({"text": "xyz"})"
                         "\n");
  testing::WriteFile(dir / "key/slice_0.txt", "[1, 5]");
  testing::WriteFile(dir / "key/slice_1.txt", "[0, 2];[3, 6]");
  testing::WriteFile(dir / "key/slice_2.txt", "");
  testing::WriteFile(dir / "key/notes.md", "other files are ignored");
  absl::StatusOr<std::vector<KeySpanDocument>> docs =
      ReadLongPplSlices(dir / "key", dir / "texts.jsonl");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0].key_ranges, (Ranges{{1, 6}}));
  EXPECT_EQ((*docs)[1].id, "second");
  EXPECT_EQ((*docs)[1].key_ranges, (Ranges{{0, 2}, {3, 6}}));
  EXPECT_TRUE((*docs)[2].key_ranges.empty());
  EXPECT_NE((*docs)[1].where.find("slice_1.txt"), std::string::npos);

  // A bad range names the slice file and the document.
  testing::WriteFile(dir / "key/slice_1.txt", "[0, 2];[3, 7]");
  ExpectInvalid(ReadLongPplSlices(dir / "key", dir / "texts.jsonl").status(),
                {"key/slice_1.txt", "document second", "range 2 [3, 7]"});
  testing::WriteFile(dir / "key/slice_1.txt", "[0, 2]");
  // A slice file beyond the texts.
  testing::WriteFile(dir / "key/slice_3.txt", "[0, 1]");
  ExpectInvalid(ReadLongPplSlices(dir / "key", dir / "texts.jsonl").status(),
                {"key/slice_3.txt", "beyond the 3 texts"});
  std::filesystem::remove(dir / "key/slice_3.txt");
  // A missing one.
  std::filesystem::remove(dir / "key/slice_2.txt");
  absl::Status missing =
      ReadLongPplSlices(dir / "key", dir / "texts.jsonl").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("slice_2.txt"), absl::string_view::npos);
  EXPECT_EQ(
      ReadLongPplSlices(dir / "nowhere", dir / "texts.jsonl").status().code(),
      absl::StatusCode::kNotFound);
  // No texts.
  testing::WriteFile(dir / "empty.jsonl", "");
  ExpectInvalid(ReadLongPplSlices(dir / "key", dir / "empty.jsonl").status(),
                {"empty.jsonl: no documents"});
}

KeySpanDocument Document(const std::string& text, Ranges ranges) {
  KeySpanDocument doc;
  doc.id = "d";
  doc.where = "keys.jsonl:1 (document d)";
  doc.text = text;
  doc.key_ranges = std::move(ranges);
  return doc;
}

TEST(KeySpansTest, ATokenIsKeyOnlyWhenEntirelyInsideARange) {
  // Tokens "ab" "cd" "" "ef" "gh" over "abcdefgh"; key bytes [2, 5) hold
  // "cd" whole and "ef" in part, [6, 8) hold "gh".
  const std::string text = "abcdefgh";
  const Ranges tokens = {{0, 2}, {2, 4}, {4, 4}, {4, 6}, {6, 8}};
  absl::StatusOr<Indices> key =
      KeyTokenIndices(Document(text, {{2, 5}, {6, 8}}), text, tokens);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, (Indices{1, 4}));
  // The first n tokens of a truncated evaluation.
  key = KeyTokenIndices(Document(text, {{2, 5}, {6, 8}}), text,
                        absl::MakeSpan(tokens).subspan(0, 3));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, (Indices{1}));
}

TEST(KeySpansTest, RefusesAnotherTextOrBadTokenSpans) {
  const KeySpanDocument doc = Document("abcdefgh", {{2, 5}});
  ExpectInvalid(KeyTokenIndices(doc, "abcXefgh", {{0, 8}}).status(),
                {"keys.jsonl:1 (document d)", "differs", "at byte 3",
                 "key bytes [2, 5)"});
  ExpectInvalid(KeyTokenIndices(doc, "abcdefghij", {{0, 10}}).status(),
                {"document d", "at byte 8", "10 bytes vs 8"});
  ExpectInvalid(KeyTokenIndices(doc, "abcdefgh", {{0, 4}, {4, 9}}).status(),
                {"document d", "token 1 spans bytes [4, 9)"});
  ExpectInvalid(KeyTokenIndices(doc, "abcdefgh", {{4, 6}, {0, 4}}).status(),
                {"token 1"});
}

TEST(KeySpansTest, KeyRangesOfTokensMergesTheirSpans) {
  const Ranges tokens = {{0, 2}, {2, 4}, {4, 4}, {4, 6}, {6, 8}};
  EXPECT_EQ(KeyRangesOfTokens(tokens, {1, 2, 3}), (Ranges{{2, 6}}));
  EXPECT_EQ(KeyRangesOfTokens(tokens, {0, 4}), (Ranges{{0, 2}, {6, 8}}));
  EXPECT_TRUE(KeyRangesOfTokens(tokens, {2}).empty());
  EXPECT_TRUE(KeyRangesOfTokens(tokens, {}).empty());
}

// The key characters of `ranges` in `text`, one string a range.
std::vector<std::string> Strings(const std::string& text,
                                 const Ranges& ranges) {
  std::vector<std::string> out;
  for (const ByteSpan& r : ranges) {
    out.push_back(text.substr(r.begin, r.end - r.begin));
  }
  return out;
}

// Cross-tokenizer LongPPL: key text selected on byte tokens, evaluated
// with Llama 3's tokens, gives the same key characters when the ranges
// fall on Llama 3's token boundaries, and only the tokens wholly inside
// when they do not.
TEST(KeySpansTest, ByteTokenSelectionGivesLlama3TheSameKeyCharacters) {
  const std::string llama3 = testing::SharedDataPath("tokenizers/llama3");
  if (llama3.empty()) {
    GTEST_SKIP() << "Llama 3 tokenizer not found under "
                 << testing::SharedDataDir()
                 << "/tokenizers/llama3 (set HLAB_SHARED_DIR)";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> evaluated =
      MakeTokenizer("hf:" + llama3);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  std::unique_ptr<Tokenizer> reference = MakeByteTokenizer();

  const std::string text =
      "The passkey is 7421. Remember it.\nLater, in the caf\xC3\xA9: "
      "the passkey is 7421.";
  // The byte reference selects " Remember", " caf\xC3\xA9" and the second
  // " 7421" (spaces belong to the word after them, as in offset_mapping).
  const size_t remember = text.find(" Remember");
  const size_t cafe = text.find(" caf");
  const size_t second = text.rfind(" 7421");
  Indices selected;
  for (size_t i = remember; i < remember + 9; ++i) selected.push_back(i);
  for (size_t i = cafe; i < cafe + 6; ++i) selected.push_back(i);
  for (size_t i = second; i < second + 5; ++i) selected.push_back(i);
  const EncodedText bytes = reference->EncodeWithOffsets(text);
  const Ranges ranges = KeyRangesOfTokens(bytes.spans, selected);
  EXPECT_EQ(Strings(text, ranges),
            (std::vector<std::string>{" Remember", " caf\xC3\xA9", " 7421"}));

  const EncodedText tokens = (*evaluated)->EncodeWithOffsets(text);
  absl::StatusOr<Indices> key =
      KeyTokenIndices(Document(text, ranges), text, tokens.spans);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(KeyRangesOfTokens(tokens.spans, *key), ranges);
  // Llama 3's key tokens: " Remember"; " café"; " " "742" "1".
  std::string key_text;
  for (int64_t i : *key) key_text += (*evaluated)->Decode({tokens.ids[i]});
  EXPECT_EQ(key_text, " Remember caf\xC3\xA9 7421");
  EXPECT_EQ(key->size(), 5u);

  // "caf\xC3\xA9" without its space cuts Llama 3's " caf\xC3\xA9": no key
  // token, where the byte tokens had five.
  const ByteSpan word = {static_cast<int64_t>(cafe + 1),
                         static_cast<int64_t>(cafe + 6)};
  key = KeyTokenIndices(Document(text, {word}), text, tokens.spans);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_TRUE(key->empty());

  // A range that cuts Llama 3's "742" keeps only the tokens wholly inside:
  // "421" holds "1" but not "742".
  const ByteSpan cut = {static_cast<int64_t>(second + 2),
                        static_cast<int64_t>(second + 5)};
  key = KeyTokenIndices(Document(text, {cut}), text, tokens.spans);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(Strings(text, KeyRangesOfTokens(tokens.spans, *key)),
            (std::vector<std::string>{"1"}));

  // The other way, Llama 3's key tokens select the same characters among
  // byte tokens, which are finer.
  key = KeyTokenIndices(Document(text, ranges), text, tokens.spans);
  ASSERT_TRUE(key.ok());
  const Ranges from_llama3 = KeyRangesOfTokens(tokens.spans, *key);
  absl::StatusOr<Indices> byte_key =
      KeyTokenIndices(Document(text, from_llama3), text, bytes.spans);
  ASSERT_TRUE(byte_key.ok()) << byte_key.status();
  EXPECT_EQ(*byte_key, selected);
}

// The reference's slice file, in code points, for a text with a two-byte
// character, mapped onto Llama 3: the same key characters.
TEST(KeySpansTest, SliceRangesInCodePointsMapOntoLlama3Tokens) {
  const std::string llama3 = testing::SharedDataPath("tokenizers/llama3");
  if (llama3.empty()) {
    GTEST_SKIP() << "Llama 3 tokenizer not found under "
                 << testing::SharedDataDir()
                 << "/tokenizers/llama3 (set HLAB_SHARED_DIR)";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("hf:" + llama3);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "Meet at the caf\xC3\xA9 at noon." : " caf\xC3\xA9" is characters
  // [11, 16), " noon" [19, 24); in bytes [11, 17) and [20, 25).
  const std::string text = "Meet at the caf\xC3\xA9 at noon.";
  absl::StatusOr<Ranges> ranges =
      ParseLongPplSlice("[11, 16];[19, 24]", text, "slice_0.txt");
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_EQ(*ranges, (Ranges{{11, 17}, {20, 25}}));
  EXPECT_EQ(Strings(text, *ranges),
            (std::vector<std::string>{" caf\xC3\xA9", " noon"}));
  const EncodedText tokens = (*tok)->EncodeWithOffsets(text);
  absl::StatusOr<Indices> key =
      KeyTokenIndices(Document(text, *ranges), text, tokens.spans);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(KeyRangesOfTokens(tokens.spans, *key), *ranges);
}

}  // namespace
}  // namespace hlab::data
