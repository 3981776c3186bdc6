// Hugging Face tokenizer.json (hf:DIR) without shared data: Llama 3's split
// regex worked out by hand, a tiny byte-level BPE with known merges, added
// tokens, the post-processor's template, end_of_document, round trips over
// random bytes, and the refusal of every feature hlab does not read.
// tests/data/hf_tokenizer_reference_test.cc checks the real files against
// tokenizers outside hlab.
#include "data/hf_tokenizer.h"

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/internal/llama3_pretokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace hlab::data {
namespace {

using ::hlab::data::internal::Llama3PreTokenize;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::vector<std::string> Pieces(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  Llama3PreTokenize(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

// Expected pieces worked out from the regex
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
TEST(Llama3PreTokenizerTest, FollowsTheRegexOnAscii) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("Hello world"), (V{"Hello", " world"}));
  // Contractions in any case; a symbol or space joins the letters after it.
  EXPECT_EQ(Pieces("it's WE'LL 'Re"),
            (V{"it", "'s", " WE", "'LL", " '", "Re"}));
  EXPECT_EQ(Pieces("(hello,world"), (V{"(hello", ",world"}));
  // Numbers go in threes, and take no space.
  EXPECT_EQ(Pieces("1234567 x"), (V{"123", "456", "7", " x"}));
  EXPECT_EQ(Pieces("a 42"), (V{"a", " ", "42"}));
  // Symbols keep the newlines after them.
  EXPECT_EQ(Pieces("x ...\n\ny"), (V{"x", " ...\n\n", "y"}));
  // Whitespace: up to the last newline; a run before a word leaves its last
  // character to the word; at the end the whole run.
  EXPECT_EQ(Pieces("a \n \n  b"), (V{"a", " \n \n", " ", " b"}));
  EXPECT_EQ(Pieces("a\r\n\tb"), (V{"a", "\r\n", "\tb"}));
  EXPECT_EQ(Pieces("a   b"), (V{"a", "  ", " b"}));
  // A single space before a digit is a piece of its own (only letters and
  // symbols take one).
  EXPECT_EQ(Pieces("a  1"), (V{"a", " ", " ", "1"}));
  EXPECT_EQ(Pieces("a \t"), (V{"a", " \t"}));
  EXPECT_EQ(Pieces("\n\nx"), (V{"\n\n", "x"}));
  EXPECT_TRUE(Pieces("").empty());
}

TEST(Llama3PreTokenizerTest, UsesUnicodeClassesAndCaseFolding) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD"),
            (V{"caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  // NBSP is whitespace and, like any non-newline, joins the next word.
  EXPECT_EQ(Pieces("a\xC2\xA0"
                   "b"),
            (V{"a",
               "\xC2\xA0"
               "b"}));
  // Devanagari digits are \p{N}; an em dash is a symbol.
  EXPECT_EQ(Pieces("\xE0\xA5\xA8\xE0\xA5\xA9\xE0\xA5\xAA\xE0\xA5\xAB"),
            (V{"\xE0\xA5\xA8\xE0\xA5\xA9\xE0\xA5\xAA", "\xE0\xA5\xAB"}));
  EXPECT_EQ(Pieces("a\xE2\x80\x94"
                   "b"),
            (V{"a",
               "\xE2\x80\x94"
               "b"}));
  // (?i) folds U+017F (long s) to s.
  EXPECT_EQ(Pieces("x'\xC5\xBF"), (V{"x", "'\xC5\xBF"}));
  // Invalid UTF-8 bytes are symbols.
  EXPECT_EQ(Pieces("\xFF\xFEz"), (V{"\xFF\xFE", "z"}));
  EXPECT_EQ(Pieces("\xFFz"), (V{"\xFFz"}));
}

TEST(Llama3PreTokenizerTest, PiecesConcatenateToTheText) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab1 \t\r\n'sS.,\xC3\xA9\xE4\xBD\xA0\xFF";
  for (int i = 0; i < 500; ++i) {
    std::string text;
    for (int k = static_cast<int>(rng() % 30); k > 0; --k) {
      text.push_back(alphabet[rng() % alphabet.size()]);
    }
    std::string joined;
    for (const std::string& piece : Pieces(text)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

// The byte-level character of `byte` (GPT-2's bytes_to_unicode).
std::string ByteChar(int byte) {
  bool printable = (byte >= '!' && byte <= '~') ||
                   (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
  int c = byte;
  if (!printable) {
    c = 256;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        ++c;
      }
    }
  }
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return out;
}

// A tiny byte-level BPE in Llama 3's form: ids 0-255 are the bytes; merges
// h e -> 256 "he", l l -> 257, he ll -> 258, hell o -> 259, Ġ w -> 260;
// 261 "xyz" is in the vocab with no merges to it; added tokens 262 <eos>
// (special), 263 <s> (special), 264 <s>x, 265 "ab<s" (normalized).
json TinyTokenizerJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab[ByteChar(' ') + "w"] = 260;
  vocab["xyz"] = 261;
  auto added = [](const char* content, int id, bool special, bool normalized) {
    return json{
        {"id", id},          {"content", content}, {"single_word", false},
        {"lstrip", false},   {"rstrip", false},    {"normalized", normalized},
        {"special", special}};
  };
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {added("<eos>", 262, true, false), added("<s>", 263, true, false),
        added("<s>x", 264, false, false), added("ab<s", 265, false, true)}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(internal::kLlama3SplitRegex)}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}}}},
        {"pair", json::array()},
        {"special_tokens",
         {{"<s>", {{"id", "<s>"}, {"ids", {263}}, {"tokens", {"<s>"}}}},
          {"<eos>",
           {{"id", "<eos>"}, {"ids", {262}}, {"tokens", {"<eos>"}}}}}}}},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges",
         {"h e", "l l", "he ll", json::array({"hell", "o"}),
          ByteChar(' ') + " w"}}}}};
}

class TinyHfTokenizerTest : public ::testing::Test {
 protected:
  // Writes `def` (and a config naming <eos>) to the scratch dir; loads it.
  absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const json& def,
                                                    bool with_config = true) {
    testing::WriteFile(dir_ / "tokenizer.json", def.dump());
    if (with_config) {
      testing::WriteFile(dir_ / "tokenizer_config.json",
                         R"({"eos_token": {"content": "<eos>"}})");
    }
    return HfTokenizer::Load(dir_.path());
  }
  std::unique_ptr<HfTokenizer> LoadOk(const json& def) {
    absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = Load(def);
    EXPECT_TRUE(tok.ok()) << tok.status();
    return tok.ok() ? std::move(tok).value() : nullptr;
  }
  testing::ScratchDir dir_;
};

TEST_F(TinyHfTokenizerTest, MergesByRankWithinEachPiece) {
  auto tok = LoadOk(TinyTokenizerJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("hello"), (Ids{259}));
  EXPECT_EQ(tok->Encode("hell"), (Ids{258}));
  EXPECT_EQ(tok->Encode("ello"), (Ids{'e', 257, 'o'}));
  EXPECT_EQ(tok->Encode("hello world"), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok->Encode("helloo"), (Ids{259, 'o'}));
  EXPECT_EQ(tok->Encode(""), (Ids{}));
  EXPECT_EQ(tok->Decode({259, 260, 'o'}), "hello wo");
}

TEST_F(TinyHfTokenizerTest, IgnoreMergesEmitsAVocabularyWordWhole) {
  json def = TinyTokenizerJson();
  EXPECT_EQ(LoadOk(def)->Encode("xyz"), (Ids{261}));
  def["model"]["ignore_merges"] = false;
  EXPECT_EQ(LoadOk(def)->Encode("xyz"), (Ids{'x', 'y', 'z'}));
}

TEST_F(TinyHfTokenizerTest, AddedTokensAreCutOutFirstLongestMatchFirst) {
  auto tok = LoadOk(TinyTokenizerJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("hello<eos>hello"), (Ids{259, 262, 259}));
  EXPECT_EQ(tok->Encode("<s>xhello"), (Ids{264, 259}));
  EXPECT_EQ(tok->Encode("<s>hello"), (Ids{263, 259}));
  // Non-normalized tokens are matched before normalized ones (Hugging
  // Face's two passes): "<s>" wins over the earlier "ab<s".
  EXPECT_EQ(tok->Encode("ab<s>"), (Ids{'a', 'b', 263}));
  EXPECT_EQ(tok->Encode("ab<s"), (Ids{265}));
  EXPECT_EQ(tok->Encode("<eos"), (Ids{'<', 'e', 'o', 's'}));
  EXPECT_EQ(tok->Decode({263, 259, 264}), "<s>hello<s>x");
}

TEST_F(TinyHfTokenizerTest, OffsetsSpanEachTokensBytes) {
  auto tok = LoadOk(TinyTokenizerJson());
  ASSERT_NE(tok, nullptr);
  // 259 "hello", 262 <eos>, 259, 260 " w", then o r l d one byte each.
  EncodedText encoded = tok->EncodeWithOffsets("hello<eos>hello world");
  EXPECT_EQ(encoded.ids, (Ids{259, 262, 259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(encoded.spans, (std::vector<ByteSpan>{{0, 5},
                                                  {5, 10},
                                                  {10, 15},
                                                  {15, 17},
                                                  {17, 18},
                                                  {18, 19},
                                                  {19, 20},
                                                  {20, 21}}));
  // Under ignore_merges a vocabulary word is one token over its bytes.
  EXPECT_EQ(tok->EncodeWithOffsets("xyz").spans,
            (std::vector<ByteSpan>{{0, 3}}));
  EXPECT_TRUE(tok->EncodeWithOffsets("").ids.empty());
}

TEST_F(TinyHfTokenizerTest, VocabularyTemplateAndEndOfDocument) {
  auto tok = LoadOk(TinyTokenizerJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocabulary().size, 266);
  EXPECT_EQ(tok->vocabulary().end_of_document, 262);
  EXPECT_EQ(tok->vocabulary().pad, 262);
  EXPECT_EQ(tok->vocabulary().tokenizer.rfind("hf:", 0), 0u);
  EXPECT_EQ(tok->vocabulary().tokenizer.size(), 3u + 16u);
  EXPECT_EQ(tok->spec(), "hf:" + dir_.path());
  // The template is known but Encode() does not apply it.
  EXPECT_EQ(tok->template_prefix(), (Ids{263}));
  EXPECT_EQ(tok->template_suffix(), (Ids{262}));
  EXPECT_EQ(tok->Encode("hello"), (Ids{259}));
  // end_of_document decodes to a newline; ids without a token to U+FFFD.
  EXPECT_EQ(tok->Decode({259, 262, 259}), "hello\nhello");
  EXPECT_EQ(tok->Decode({-1, 266}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(TinyHfTokenizerTest, EndOfDocumentNeedsAConfigOrOneSpecialToken) {
  json def = TinyTokenizerJson();
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
      Load(def, /*with_config=*/false);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tok.status().message().find("end-of-document"),
            absl::string_view::npos);
  def["added_tokens"][1]["special"] = false;  // <eos> alone is special
  tok = Load(def, /*with_config=*/false);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocabulary().end_of_document, 262);
  testing::WriteFile(dir_ / "tokenizer_config.json",
                     R"({"eos_token": "<nope>"})");
  tok = HfTokenizer::Load(dir_.path());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(tok.status().message().find("<nope>"), absl::string_view::npos);
}

TEST_F(TinyHfTokenizerTest, RoundTripsRandomBytes) {
  auto tok = LoadOk(TinyTokenizerJson());
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int k = static_cast<int>(rng() % 48); k > 0; --k) {
      // Half the bytes from "hello world" so that merges happen.
      text.push_back(rng() % 2 ? "hello world"[rng() % 11]
                               : static_cast<char>(rng() % 256));
    }
    if (text.find("<s>") != std::string::npos ||
        text.find("<eos>") != std::string::npos ||
        text.find("ab<s") != std::string::npos) {
      continue;  // added tokens decode as themselves, <eos> as "\n"
    }
    Ids ids = tok->Encode(text);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 262) << id;
    ASSERT_EQ(tok->Decode(ids), text);
  }
}

TEST_F(TinyHfTokenizerTest, FactoryBuildsHfSpecsRelativeToABaseDir) {
  ASSERT_NE(LoadOk(TinyTokenizerJson()), nullptr);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("hf:" + dir_.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("hello"), (Ids{259}));
  std::string parent = dir_.path().substr(0, dir_.path().rfind('/'));
  std::string name = dir_.path().substr(dir_.path().rfind('/') + 1);
  tok = MakeTokenizer("hf:" + name, parent);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(MakeTokenizer("hf:" + dir_ / "absent").status().code(),
            absl::StatusCode::kNotFound);
}

// Each change of the tiny file to a feature hlab does not read, and the
// words its error must hold (besides the file's path).
struct Refusal {
  const char* name;
  std::function<void(json&)> change;
  const char* message;
  absl::StatusCode code = absl::StatusCode::kUnimplemented;
};

TEST_F(TinyHfTokenizerTest, RefusesWhatItDoesNotImplement) {
  const std::vector<Refusal> refusals = {
      {"normalizer",
       [](json& d) {
         d["normalizer"] = {{"type", "NFKC"}};
       },
       "normalizer.type \"NFKC\" is not supported"},
      {"wordpiece", [](json& d) { d["model"]["type"] = "WordPiece"; },
       "model.type \"WordPiece\" is not supported (hlab reads byte-level BPE)"},
      {"dropout", [](json& d) { d["model"]["dropout"] = 0.1; },
       "model.dropout"},
      {"byte_fallback", [](json& d) { d["model"]["byte_fallback"] = true; },
       "model.byte_fallback"},
      {"suffix", [](json& d) { d["model"]["end_of_word_suffix"] = "</w>"; },
       "model.end_of_word_suffix"},
      {"metaspace",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
       },
       "pre_tokenizer.type \"Metaspace\""},
      {"other_regex",
       [](json& d) {
         d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
       },
       "pre_tokenizer.pretokenizers[0].pattern \"\\\\w+\""},
      {"string_pattern",
       [](json& d) {
         d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
       },
       "pre_tokenizer.pretokenizers[0].pattern"},
      {"removed_behavior",
       [](json& d) {
         d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
       },
       "behavior \"Removed\""},
      {"prefix_space",
       [](json& d) {
         d["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
       },
       "add_prefix_space true"},
      {"no_byte_level",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"].erase(1); },
       "pre_tokenizer.pretokenizers[0].type \"Split\""},
      {"lstrip", [](json& d) { d["added_tokens"][0]["lstrip"] = true; },
       "added_tokens[0].lstrip true"},
      {"decoder",
       [](json& d) {
         d["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder.type \"WordPiece\""},
      {"post_processor",
       [](json& d) {
         d["post_processor"] = {{"type", "BertProcessing"}};
       },
       "post_processor.type \"BertProcessing\""},
      {"truncation",
       [](json& d) {
         d["truncation"] = {{"max_length", 512}};
       },
       "truncation is not supported"},
      {"padding", [](json& d) { d["padding"] = json::object(); },
       "padding is not supported"},
      {"unknown_key", [](json& d) { d["extra"] = 1; },
       "the key \"extra\" is not supported"},
      {"huge_id",
       [](json& d) { d["added_tokens"][0]["id"] = int64_t{1} << 40; },
       "added_tokens[0] needs a content and an id below 2^24",
       absl::StatusCode::kDataLoss},
      {"template_id",
       [](json& d) {
         d["post_processor"]["special_tokens"]["<s>"]["ids"] = {70000};
       },
       "the post_processor's template has id 70000, which no token has",
       absl::StatusCode::kDataLoss},
      {"vocab_list_id",
       [](json& d) { d["model"]["vocab"]["zz"] = json::array({300}); },
       "model.vocab: an entry's id is not a number",
       absl::StatusCode::kDataLoss},
      {"vocab_string_id", [](json& d) { d["model"]["vocab"]["zz"] = "300"; },
       "model.vocab: bad id (not 0 <= id < 2^24) for token \"zz\"",
       absl::StatusCode::kDataLoss},
      {"merge_one_token",
       [](json& d) { d["model"]["merges"].push_back(json::array({"a"})); },
       "model.merges[5] [\"a\"] is not two tokens",
       absl::StatusCode::kDataLoss},
      {"merge_object",
       [](json& d) { d["model"]["merges"].push_back(json::object()); },
       "model.merges[5] {} is not two tokens", absl::StatusCode::kDataLoss},
      {"missing_byte", [](json& d) { d["model"]["vocab"].erase("a"); },
       "no token for byte 97", absl::StatusCode::kDataLoss},
      {"bad_merge", [](json& d) { d["model"]["merges"].push_back("x q"); },
       "model.merges[5] \"x q\": \"xq\" is not in model.vocab",
       absl::StatusCode::kDataLoss},
  };
  for (const Refusal& r : refusals) {
    json def = TinyTokenizerJson();
    r.change(def);
    absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = Load(def);
    ASSERT_FALSE(tok.ok()) << r.name;
    EXPECT_EQ(tok.status().code(), r.code) << r.name << ": " << tok.status();
    EXPECT_NE(tok.status().message().find(dir_ / "tokenizer.json"),
              absl::string_view::npos)
        << r.name << ": " << tok.status();
    EXPECT_NE(tok.status().message().find(r.message), absl::string_view::npos)
        << r.name << ": " << tok.status();
  }
}

TEST_F(TinyHfTokenizerTest, RefusesATokenGivenTwice) {
  // A JSON object with a repeated key: nlohmann's json cannot hold one, so
  // the text is edited.
  std::string text = TinyTokenizerJson().dump();
  const std::string entry = "\"xyz\":261";
  ASSERT_NE(text.find(entry), std::string::npos);
  text.replace(text.find(entry), entry.size(), entry + ",\"xyz\":266");
  testing::WriteFile(dir_ / "tokenizer.json", text);
  testing::WriteFile(dir_ / "tokenizer_config.json",
                     R"({"eos_token": "<eos>"})");
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
      HfTokenizer::Load(dir_.path());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(
      tok.status().message().find("model.vocab has the token \"xyz\" twice"),
      absl::string_view::npos)
      << tok.status();
}

// The hand-written files of tests/data/fixtures/hf_tokenizer/refused.
TEST(HfTokenizerRefusalTest, RefusesUnigramAndNormalizerFiles) {
  const std::string fixtures =
      std::string(HLAB_REPO_ROOT) + "/tests/data/fixtures/hf_tokenizer/refused";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer("hf:" + fixtures + "/unigram");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(tok.status().message(),
            fixtures +
                "/unigram/tokenizer.json: model.type \"Unigram\" is not "
                "supported (hlab reads byte-level BPE)");
  tok = MakeTokenizer("hf:" + fixtures + "/normalizer");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(tok.status().message(),
            fixtures +
                "/normalizer/tokenizer.json: normalizer.type \"NFC\" is not "
                "supported (hlab reads tokenizers without a normalizer)");
}

TEST(HfTokenizerRefusalTest, NotJsonIsDataLoss) {
  testing::ScratchDir dir;
  // Truncated, and a number no double holds (nlohmann throws on it even
  // when told not to).
  for (const char* text : {"{\"model\": ", "{\"model\": 1e999}"}) {
    testing::WriteFile(dir / "tokenizer.json", text);
    absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
        HfTokenizer::Load(dir.path());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_NE(tok.status().message().find(dir / "tokenizer.json"),
              absl::string_view::npos);
  }
}

}  // namespace
}  // namespace hlab::data
