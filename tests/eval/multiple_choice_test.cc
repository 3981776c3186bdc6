// Multiple-choice tasks (eval/multiple_choice.h) with a scorer of known
// log-likelihoods (no model): exact acc and acc_norm, lm-eval's request
// format, few-shot draws, and bad task files named by file and line.
#include "eval/multiple_choice.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "gtest/gtest.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Byte tokens: each costs cost[b] nats (1 by default), so a continuation's
// log-likelihood is minus the sum of its bytes' costs. Records what it saw.
class ByteCostScorer final : public TokenScorer {
 public:
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    std::vector<float> nll;
    for (size_t i = 1; i < tokens.size(); ++i) {
      const auto it = cost.find(tokens[i]);
      nll.push_back(it == cost.end() ? 1.0f : it->second);
    }
    return nll;
  }
  std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) override {
    ++batches;
    for (const auto& s : sequences) seen.push_back(s);
    return TokenScorer::ScoreBatch(sequences);
  }

  std::map<int32_t, float> cost;
  std::vector<std::vector<int32_t>> seen;
  int batches = 0;
};

McTaskConfig Config(const std::string& name, const std::string& file,
                    const std::string& fewshot_file = "",
                    int64_t num_fewshot = 0) {
  McTaskConfig c;
  c.name = name;
  c.file = file;
  c.fewshot_file = fewshot_file;
  c.num_fewshot = num_fewshot;
  return c;
}

McTaskConfig Limited(const std::string& file, int64_t limit) {
  McTaskConfig c = Config("t", file);
  c.limit = limit;
  return c;
}

class MultipleChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("mc_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  static std::string Line(const std::string& context,
                          const std::vector<std::string>& choices, int gold) {
    return Json({{"context", context}, {"choices", choices}, {"gold", gold}})
               .dump() +
           "\n";
  }

  fs::path dir_;
  std::unique_ptr<data::Tokenizer> tok_ = data::MakeByteTokenizer();
};

TEST_F(MultipleChoiceTest, ExactAccAndAccNormFromKnownLogLikelihoods) {
  // Every byte costs 1 but the context's "Q" and ":" (100: a slice that
  // took a context token would show), so ll(" " + choice) = -(1 + bytes):
  // acc picks the shortest choice, acc_norm the most characters.
  const std::string file = Write(
      "t.jsonl",
      Line("Q:", {"x", "yyy"}, 0) +             // acc right, acc_norm wrong
          Line("Q:", {"xx", "y", "zzzz"}, 2) +  // acc wrong, acc_norm right
          "\n" +                                // blank lines are skipped
          Line("Q:", {"ab", "cd"}, 1) +  // ties go to index 0: both wrong
          // " \xC3\xA9" (e acute) and " ab" both cost 3: acc ties to 0
          // (right); per character -3/1 < -3/2 picks "ab" (wrong), where
          // per byte would tie and pick "é".
          Line("Q:", {"\xC3\xA9", "ab"}, 0));
  ByteCostScorer scorer;
  scorer.cost['Q'] = 100;
  scorer.cost[':'] = 100;
  McTaskConfig config = Config("t", file);
  absl::StatusOr<McPreparedTask> task = PrepareMcTask(config, *tok_, 64);
  ASSERT_TRUE(task.ok()) << task.status();
  absl::StatusOr<McTaskResult> r = ScoreMcTask(scorer, *task);
  ASSERT_TRUE(r.ok()) << r.status();

  ASSERT_EQ(r->questions, 4);
  EXPECT_EQ(r->correct, 2);
  EXPECT_EQ(r->correct_norm, 1);
  EXPECT_DOUBLE_EQ(r->acc, 0.5);
  EXPECT_DOUBLE_EQ(r->acc_norm, 0.25);
  EXPECT_DOUBLE_EQ(*r->acc_stderr, std::sqrt(0.25 / 3));
  EXPECT_DOUBLE_EQ(*r->acc_norm_stderr, std::sqrt(0.25 * 0.75 / 3));
  const std::vector<std::vector<double>> ll = {
      {-2, -4}, {-3, -2, -5}, {-3, -3}, {-3, -3}};
  const std::vector<int64_t> pred = {0, 1, 0, 0}, pred_norm = {1, 2, 0, 1};
  const std::vector<int64_t> lines = {1, 2, 4, 5};
  for (size_t q = 0; q < 4; ++q) {
    EXPECT_EQ(r->scores[q].loglikelihood, ll[q]) << q;
    EXPECT_EQ(r->scores[q].pred, pred[q]) << q;
    EXPECT_EQ(r->scores[q].pred_norm, pred_norm[q]) << q;
    EXPECT_EQ(r->scores[q].line, lines[q]) << q;
  }
  EXPECT_EQ(r->sequences, 9);
  EXPECT_EQ(r->tokens, 2 + 4 + 3 + 2 + 5 + 3 + 3 + 3 + 3);
  // All four questions' choices went to the scorer in one batch, each the
  // separator, the context, the continuation.
  EXPECT_EQ(scorer.batches, 1);
  ASSERT_EQ(scorer.seen.size(), 9u);
  EXPECT_EQ(scorer.seen[0], (std::vector<int32_t>{256, 'Q', ':', ' ', 'x'}));

  const Json details = Json::parse(McResultToJson(*r));
  EXPECT_EQ(details["n"], 4);
  EXPECT_EQ(details["acc"], 0.5);
  EXPECT_EQ(details["acc_norm"], 0.25);
  EXPECT_EQ(details["normalization"], "characters");
  EXPECT_EQ(details["num_fewshot"], 0);
  EXPECT_EQ(details["task"], "t");
}

TEST_F(MultipleChoiceTest, OneQuestionHasNoStderr) {
  const std::string file = Write("one.jsonl", Line("", {"a", "b"}, 1));
  ByteCostScorer scorer;
  scorer.cost['b'] = 0.5;
  auto task = PrepareMcTask(Config("one", file), *tok_, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  // An empty context: the separator alone precedes " b".
  EXPECT_EQ(task->requests[0].context, std::vector<int32_t>{256});
  auto r = ScoreMcTask(scorer, *task);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acc, 1.0);
  EXPECT_FALSE(r->acc_stderr.has_value());
  EXPECT_TRUE(Json::parse(McResultToJson(*r))["acc_stderr"].is_null());
}

TEST_F(MultipleChoiceTest, TrailingWhitespaceMovesToTheContinuation) {
  // lm-eval's _encode_pair: "A: " + " 4" is scored as "A:" + "  4".
  const std::string file = Write("ws.jsonl", Line("A: ", {"4"}, 0));
  auto task = PrepareMcTask(Config("ws", file), *tok_, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->requests[0].context, (std::vector<int32_t>{256, 'A', ':'}));
  EXPECT_EQ(task->requests[0].continuations[0],
            (std::vector<int32_t>{' ', ' ', '4'}));
  EXPECT_EQ(task->longest_tokens, 5);
}

TEST_F(MultipleChoiceTest, FewShotExamplesAreDrawnWithTheSeed) {
  std::string text;
  for (int i = 0; i < 6; ++i) {
    text +=
        Line("q" + std::to_string(i) + ":", {"no", "a" + std::to_string(i)}, 1);
  }
  const std::string file = Write("fs.jsonl", text);
  McTaskConfig config = Config("fs", file, file, 3);
  auto task = PrepareMcTask(config, *tok_, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->fewshot_pool, 6);
  std::set<std::string> contexts;
  for (size_t q = 0; q < task->requests.size(); ++q) {
    const std::vector<int32_t>& ids = task->requests[q].context;
    const std::string context =
        tok_->Decode(std::vector<int32_t>(ids.begin() + 1, ids.end()));
    contexts.insert(context);
    // Three examples "q<j>: a<j>\n\n", none of them the question itself,
    // which comes last.
    const std::string own = "q" + std::to_string(q) + ":";
    ASSERT_GE(context.size(), own.size());
    EXPECT_EQ(context.substr(context.size() - own.size()), own);
    EXPECT_EQ(context.find(own + " a"), std::string::npos) << context;
    std::set<char> drawn;
    size_t at = 0;
    for (int e = 0; e < 3; ++e) {
      ASSERT_EQ(context[at], 'q') << context;
      const char j = context[at + 1];
      EXPECT_EQ(context.substr(at, 8),
                std::string("q") + j + ": a" + j + "\n\n");
      drawn.insert(j);
      at += 8;
    }
    EXPECT_EQ(drawn.size(), 3u) << context;
    EXPECT_EQ(at + own.size(), context.size());
  }
  // The same seed draws the same examples; the draws differ by question.
  auto again = PrepareMcTask(config, *tok_, 0);
  ASSERT_TRUE(again.ok());
  for (size_t q = 0; q < task->requests.size(); ++q) {
    EXPECT_EQ(again->requests[q].context, task->requests[q].context);
  }
  EXPECT_GT(contexts.size(), 1u);
  config.seed = 99;
  auto other = PrepareMcTask(config, *tok_, 0);
  ASSERT_TRUE(other.ok());
  bool differs = false;
  for (size_t q = 0; q < task->requests.size(); ++q) {
    differs =
        differs || other->requests[q].context != task->requests[q].context;
  }
  EXPECT_TRUE(differs);
}

TEST_F(MultipleChoiceTest, FewShotDelimitersAreTheConfigured) {
  McDocument example{
      .line = 1, .context = "2+2=", .choices = {"3", "4"}, .gold = 1};
  McDocument doc{.line = 1, .context = "1+1=", .choices = {"2"}, .gold = 0};
  McTaskConfig config;
  EXPECT_EQ(McContext(doc, {&example, &example}, config),
            "2+2= 4\n\n2+2= 4\n\n1+1=");
  config.target_delimiter = "";
  config.fewshot_delimiter = "\n";
  EXPECT_EQ(McContext(doc, {&example}, config), "2+2=4\n1+1=");
}

TEST_F(MultipleChoiceTest, BadTaskFilesNameTheFileAndLine) {
  struct Case {
    std::string text, error;
  };
  const std::vector<Case> cases = {
      {Line("a", {"x"}, 0) + Line("b", {"x", "y"}, 2),
       ":2: gold: index 2 is out of range: there are 2 choices"},
      {Line("a", {"x"}, 0) + Line("b", {"x", "y"}, -1),
       ":2: gold: index -1 is out of range"},
      {Line("a", {"x"}, 0) + "\n" + R"({"context": "b", "choices": []})" + "\n",
       ":3: choices: no choices"},
      {R"({"context": "b", "gold": 0})"
       "\n",
       ":1: choices: no choices"},
      {R"({"context": "b", "choices": ["x", ""], "gold": 0})"
       "\n",
       ":1: choices[1]: must be a non-empty string"},
      {R"({"context": 3, "choices": ["x"], "gold": 0})"
       "\n",
       ":1: context: must be a string"},
      {R"({"context": "b", "choices": ["x"], "gold": "0"})"
       "\n",
       ":1: gold: must be the answer's index"},
      {Line("a", {"x"}, 0) + "{not json\n", ":2: not JSON"},
      {"[1, 2]\n", ":1: must be a JSON object"},
      {"\n \n", ": no questions"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string file =
        Write("bad" + std::to_string(i) + ".jsonl", cases[i].text);
    auto task = PrepareMcTask(Config("bad", file), *tok_, 0);
    ASSERT_FALSE(task.ok()) << i;
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_EQ(task.status().message().rfind(file + cases[i].error, 0), 0u)
        << i << ": " << task.status();
  }
}

TEST_F(MultipleChoiceTest, AContextLongerThanTheModelsIsNamed) {
  // Line 2: 10 context bytes + " yes" = 14 tokens.
  const std::string file = Write(
      "long.jsonl", Line("short", {"no"}, 0) + Line("0123456789", {"yes"}, 0));
  auto fits = PrepareMcTask(Config("long", file), *tok_, 14);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->longest_tokens, 14);
  auto task = PrepareMcTask(Config("long", file), *tok_, 13);
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(task.status().message().rfind(
                file + ":2: the context and choices[0] take 14 tokens, more "
                       "than the model's context of 13 tokens",
                0),
            0u)
      << task.status();
}

TEST_F(MultipleChoiceTest, BadConfigurationsAreNamed) {
  const std::string file = Write("ok.jsonl", Line("a", {"x"}, 0));
  const std::string pool = Write("pool.jsonl", Line("b", {"y"}, 0));
  const std::vector<std::pair<McTaskConfig, std::string>> cases = {
      {Config("", file), "name: must not be empty"},
      {Config("t", ""), "file: is required"},
      {Config("t", file, "", 1),
       "fewshot_file: is required with num_fewshot > 0"},
      {Config("t", file, pool, 2),
       "num_fewshot: 2 examples asked, but " + pool + " holds 1 questions"},
      {Config("t", file, file, 1), "num_fewshot: 1 examples asked, but " +
                                       file +
                                       " holds 0 questions "
                                       "besides the one asked"},
      {Limited(file, -1), "limit: must be >= 0"},
  };
  for (const auto& [config, error] : cases) {
    auto task = PrepareMcTask(config, *tok_, 0);
    ASSERT_FALSE(task.ok()) << error;
    EXPECT_EQ(task.status().message().rfind(error, 0), 0u) << task.status();
  }
  auto missing =
      PrepareMcTask(Config("t", (dir_ / "nope.jsonl").string()), *tok_, 0);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MultipleChoiceTest, LimitKeepsTheFirstQuestions) {
  const std::string file =
      Write("l.jsonl",
            Line("a", {"x"}, 0) + Line("b", {"x"}, 0) + Line("c", {"x"}, 0));
  McTaskConfig limited = Config("l", file);
  limited.limit = 2;
  auto task = PrepareMcTask(limited, *tok_, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_EQ(task->requests.size(), 2u);
  EXPECT_EQ(task->requests[1].line, 2);
}

TEST_F(MultipleChoiceTest, Utf8CharactersCountsCodePoints) {
  EXPECT_EQ(Utf8Characters(""), 0);
  EXPECT_EQ(Utf8Characters("abc"), 3);
  EXPECT_EQ(Utf8Characters("\xC3\xA9t\xC3\xA9"), 3);  // "été"
  EXPECT_EQ(Utf8Characters("\xF0\x9F\x99\x82"), 1);   // U+1F642
  EXPECT_EQ(Utf8Characters("\xE2\x82\xAC"
                           "5"),
            2);  // "€5"
}

TEST_F(MultipleChoiceTest, TheBundledExampleFitsASmallModel) {
  const std::string root = HLAB_REPO_ROOT;
  McTaskConfig config =
      Config("simple_qa", root + "/examples/eval/simple_qa.jsonl",
             root + "/examples/eval/simple_qa_fewshot.jsonl");
  auto task = PrepareMcTask(config, *tok_, 128);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->requests.size(), 20u);
  EXPECT_EQ(task->fewshot_pool, 5);
  // Three examples from the few-shot file still fit 256 tokens.
  config.num_fewshot = 3;
  auto three = PrepareMcTask(config, *tok_, 256);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_GT(three->longest_tokens, task->longest_tokens);
}

}  // namespace
}  // namespace hlab::eval
