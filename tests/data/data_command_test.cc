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

Result RunData(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  int code = RunDataCommand(args, out, err);
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

}  // namespace
}  // namespace hlab::data
