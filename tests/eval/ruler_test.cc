// RULER's generators (eval/ruler/ruler_tasks.h): exact lengths, answers
// stated exactly where and as often as said, no accidental copies,
// determinism; the metrics; the evaluation with known-answer scorers
// (eval/ruler/ruler.h); bad input. No LibTorch.
#include "eval/ruler/ruler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/tokenizer.h"
#include "eval/ruler/ruler_tasks.h"
#include "eval/ruler/word_lists.h"
#include "gtest/gtest.h"
#include "tests/data/test_util.h"

namespace hlab::eval::ruler {
namespace {

int64_t Count(const std::string& text, const std::string& needle) {
  const std::string t = absl::AsciiStrToLower(text);
  const std::string n = absl::AsciiStrToLower(needle);
  int64_t c = 0;
  for (size_t at = t.find(n); at != std::string::npos; at = t.find(n, at + 1)) {
    ++c;
  }
  return c;
}

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

// A small SQuAD file: three paragraphs, four questions (one unanswerable).
std::string SquadFile() {
  return TempFile("ruler_test_squad.json", R"({"data": [{"paragraphs": [
    {"context": "The Loire is the longest river in France.",
     "qas": [{"question": "Which is the longest river in France?",
              "answers": [{"text": "The Loire"}, {"text": "Loire"}]},
             {"question": "Is it wet?", "answers": [], "is_impossible": true}]},
    {"context": "Mount Elbrus is the highest peak in Europe.",
     "qas": [{"question": "What is Europe's highest peak?",
              "answers": [{"text": "Mount Elbrus"}]}]},
    {"context": "Saturn has the most known moons of any planet.",
     "qas": [{"question": "Which planet has the most moons?",
              "answers": [{"text": "Saturn"}]}]}]}]})");
}

std::string HotpotFile() {
  return TempFile("ruler_test_hotpot.json", R"([
    {"question": "Which river flows through the capital of Austria?",
     "answer": "Danube",
     "supporting_facts": [["Vienna", 0], ["Danube", 0]],
     "context": [["Vienna", ["Vienna is the capital of Austria."]],
                 ["Danube", ["The Danube flows through Vienna."]],
                 ["Oslo", ["Oslo is the capital of Norway."]],
                 ["Nile", ["The Nile flows through Cairo."]]]}])");
}

class RulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto squad = LoadSquad(SquadFile());
    ASSERT_TRUE(squad.ok()) << squad.status();
    sources_.squad = *squad;
    auto hotpot = LoadHotpotQa(HotpotFile());
    ASSERT_TRUE(hotpot.ok()) << hotpot.status();
    sources_.hotpotqa = *hotpot;
    // An essay of our own words when the shared novel is absent.
    const std::string novel =
        data::testing::SharedDataPath("gutenberg/frankenstein_pg84.txt");
    auto loaded = LoadRulerSources(novel, "", "");
    if (!novel.empty() && loaded.ok()) {
      sources_.essay = loaded->essay;
    } else {
      std::vector<std::string> words;
      for (int i = 0; i < 3000; ++i) {
        words.push_back(i % 9 == 8 ? "quietly." : "we walked far");
      }
      sources_.essay = absl::StrJoin(words, " ");
    }
  }
  RulerSources sources_;
  std::unique_ptr<data::Tokenizer> bytes_ = data::MakeByteTokenizer();
};

// Every invariant the header promises, for one sample.
void CheckSample(const RulerTaskInfo& task, const RulerSample& s,
                 const data::Tokenizer& tokenizer, int64_t length) {
  SCOPED_TRACE(task.name + " at " + std::to_string(length));
  EXPECT_EQ(static_cast<int64_t>(s.prompt.size()) + s.tokens_to_generate,
            length);
  EXPECT_EQ(tokenizer.Decode(s.prompt), s.text);
  ASSERT_FALSE(s.answers.empty());
  for (const Placement& p : s.placements) {
    ASSERT_LE(p.end, static_cast<int64_t>(s.prompt.size()));
    EXPECT_EQ(tokenizer.Decode(std::vector<int32_t>(s.prompt.begin() + p.begin,
                                                    s.prompt.begin() + p.end)),
              p.text);
  }
  if (task.family == "niah") {
    // Each answer once, in a stated needle about the asked key.
    ASSERT_EQ(s.placements.size(), s.answers.size());
    for (const std::string& a : s.answers) {
      EXPECT_EQ(Count(s.text, a), 1) << a;
      int64_t in_needles = 0;
      for (const Placement& p : s.placements) {
        in_needles += absl::StrContains(p.text, a) ? 1 : 0;
        EXPECT_TRUE(absl::StartsWith(p.text, "One of the special magic "));
      }
      EXPECT_EQ(in_needles, 1) << a;
    }
  } else if (task.family == "vt") {
    ASSERT_EQ(s.answers.size(), 5u);
    ASSERT_EQ(s.placements.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(absl::StrContains(s.placements[i].text,
                                    "VAR " + s.answers[i] + " = "));
      EXPECT_EQ(Count(s.text, s.answers[i]), i < 4 ? 2 : 1);
    }
    // The chain is in order: each statement names the previous variable.
    for (size_t i = 1; i < 5; ++i) {
      EXPECT_LT(s.placements[i - 1].begin, s.placements[i].begin);
      EXPECT_TRUE(absl::EndsWith(s.placements[i].text,
                                 "VAR " + s.answers[i - 1] + " "));
    }
  } else if (task.family == "cwe" || task.family == "fwe") {
    // The answers are strictly the most frequent words of the list.
    const size_t list_begin = task.family == "cwe"
                                  ? s.text.rfind("Memorize the ones")
                                  : s.text.find("coded words. ");
    const size_t list_end = s.text.rfind("\nQuestion:");
    ASSERT_NE(list_begin, std::string::npos);
    const std::string list = s.text.substr(list_begin, list_end - list_begin);
    std::map<std::string, int64_t> counts;
    for (absl::string_view w : absl::StrSplit(list, absl::ByAnyChar(" \n"))) {
      if (w.empty() || w == "..." || absl::EndsWith(w, ".") ||
          absl::AsciiStrToLower(w) != w) {
        continue;
      }
      ++counts[std::string(w)];
    }
    int64_t least_answer = 1 << 30;
    for (const std::string& a : s.answers) {
      least_answer = std::min(least_answer, counts[a]);
      EXPECT_EQ(Count(s.text, a), counts[a]) << a << " outside the list";
    }
    for (const auto& [w, c] : counts) {
      if (std::find(s.answers.begin(), s.answers.end(), w) == s.answers.end()) {
        EXPECT_LT(c, least_answer) << w;
      }
    }
    EXPECT_EQ(s.answers.size(), task.family == "cwe" ? 10u : 3u);
  } else {  // qa: the gold documents are there
    ASSERT_FALSE(s.placements.empty());
    bool answer_in_gold = false;
    for (const Placement& p : s.placements) {
      for (const std::string& a : s.answers) {
        answer_in_gold = answer_in_gold || absl::StrContains(p.text, a);
      }
    }
    EXPECT_TRUE(answer_in_gold);
  }
}

TEST_F(RulerTest, EveryTaskKeepsItsInvariantsAtSeveralLengths) {
  for (const RulerTaskInfo& task : RulerTasks()) {
    // Both of cwe's regimes (below 4096 tokens and above; in bytes the
    // long one needs 6237).
    for (int64_t length : {2048, 3000, 8192}) {
      for (int64_t index : {0, 1, 2}) {
        auto s = MakeRulerSample(task, length, /*seed=*/7, index, *bytes_,
                                 sources_, 0);
        ASSERT_TRUE(s.ok()) << task.name << ": " << s.status();
        CheckSample(task, *s, *bytes_, length);
      }
    }
  }
}

TEST_F(RulerTest, LengthsAreExactInTokensOfABpeTokenizer) {
  const std::string gpt2 = data::testing::SharedDataPath("tokenizers/gpt2");
  if (gpt2.empty()) GTEST_SKIP() << "no ../shared/data/tokenizers/gpt2";
  auto tokenizer = data::MakeTokenizer("gpt2:" + gpt2);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  for (const RulerTaskInfo& task : RulerTasks()) {
    auto s = MakeRulerSample(task, 3000, 1, 0, **tokenizer, sources_, 0);
    ASSERT_TRUE(s.ok()) << task.name << ": " << s.status();
    CheckSample(task, *s, **tokenizer, 3000);
  }
}

TEST_F(RulerTest, SamplesAreAPureFunctionOfTheirArguments) {
  const RulerTaskInfo task = *FindRulerTask("niah_multikey_1");
  auto a = MakeRulerSample(task, 2048, 3, 5, *bytes_, sources_, 0);
  auto b = MakeRulerSample(task, 2048, 3, 5, *bytes_, sources_, 0);
  auto c = MakeRulerSample(task, 2048, 3, 6, *bytes_, sources_, 0);
  auto d = MakeRulerSample(task, 2048, 4, 5, *bytes_, sources_, 0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->prompt, b->prompt);
  EXPECT_EQ(a->answers, b->answers);
  EXPECT_NE(a->prompt, c->prompt);
  EXPECT_NE(a->prompt, d->prompt);
}

TEST_F(RulerTest, TheHaystackGrowsWithTheLength) {
  const RulerTaskInfo task = *FindRulerTask("niah_single_1");
  auto small = MakeRulerSample(task, 1024, 0, 0, *bytes_, sources_, 0);
  auto large = MakeRulerSample(task, 8192, 0, 0, *bytes_, sources_, 0);
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_GT(large->units, 6 * small->units);
  // The padding is less than one more unit (a noise paragraph and "\n").
  EXPECT_LT(large->padding, 91);
}

TEST_F(RulerTest, WordListsHaveNoWordInsideAnother) {
  const auto& words = RulerCommonWords();
  ASSERT_GT(words.size(), 400u);
  for (const std::string& a : words) {
    for (const std::string& b : words) {
      if (a != b) {
        ASSERT_FALSE(absl::StrContains(b, a)) << a << " in " << b;
      }
    }
    for (const std::string& n : NoiseWords()) ASSERT_NE(a, n);
  }
}

TEST(RulerMetricTest, StringMatchesAreRulers) {
  EXPECT_DOUBLE_EQ(StringMatchAll("The numbers are 12 and 34.", {"12", "56"}),
                   0.5);
  EXPECT_DOUBLE_EQ(StringMatchAll("ABC-def", {"abc-DEF"}), 1.0);
  EXPECT_DOUBLE_EQ(StringMatchAll("anything", {}), 0.0);
  EXPECT_DOUBLE_EQ(StringMatchPart("It is Saturn.", {"Jupiter", "saturn"}),
                   1.0);
  EXPECT_DOUBLE_EQ(StringMatchPart("It is Mars.", {"Jupiter", "Saturn"}), 0);
  EXPECT_EQ(PostprocessPrediction("  12\t34\x01 \n"), "12\n34");
}

// Answers with what it was told for each prompt (an oracle), or never.
class OracleScorer : public TokenScorer {
 public:
  OracleScorer(const data::Tokenizer& tokenizer, bool knows)
      : tokenizer_(tokenizer), knows_(knows) {}
  void Teach(const RulerSample& s) { answers_[s.prompt] = s.answers; }
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    return std::vector<float>(tokens.size() - 1, 0.0f);
  }
  absl::StatusOr<std::vector<int32_t>> Generate(
      const std::vector<int32_t>& prompt,
      const GenerateOptions& options) override {
    ++calls_;
    std::string text = " I do not know.";
    auto it = answers_.find(prompt);
    if (knows_ && it != answers_.end()) {
      text = " " + absl::StrJoin(it->second, ", ");
    }
    std::vector<int32_t> ids = tokenizer_.Encode(text);
    if (static_cast<int64_t>(ids.size()) > options.max_new_tokens) {
      ids.resize(static_cast<size_t>(options.max_new_tokens));
    }
    return ids;
  }
  int calls_ = 0;

 private:
  const data::Tokenizer& tokenizer_;
  bool knows_;
  std::map<std::vector<int32_t>, std::vector<std::string>> answers_;
};

TEST_F(RulerTest, AModelThatAnswersScoresOneAndOneThatNeverDoesScoresZero) {
  RulerConfig config;
  config.lengths = {2048, 3000};
  config.samples = 3;
  config.seed = 11;
  config.tokens_to_generate = 200;  // room for cwe's ten words
  for (bool knows : {true, false}) {
    OracleScorer scorer(*bytes_, knows);
    for (const RulerTaskInfo& t : RulerTasks()) {
      for (int64_t length : config.lengths) {
        for (int64_t i = 0; i < config.samples; ++i) {
          auto s = MakeRulerSample(t, length, config.seed, i, *bytes_, sources_,
                                   config.tokens_to_generate);
          ASSERT_TRUE(s.ok()) << s.status();
          scorer.Teach(*s);
        }
      }
    }
    int64_t last_done = 0;
    auto r = EvaluateRuler(scorer, *bytes_, config, sources_,
                           [&](int64_t done, int64_t total) {
                             EXPECT_EQ(done, last_done + 1);
                             EXPECT_EQ(total, 13 * 2 * 3);
                             last_done = done;
                           });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(scorer.calls_, 13 * 2 * 3);
    EXPECT_EQ(r->tasks.size(), 13u);
    EXPECT_DOUBLE_EQ(r->score, knows ? 1.0 : 0.0);
    for (const RulerCell& c : r->cells) {
      EXPECT_DOUBLE_EQ(c.score, knows ? 1.0 : 0.0) << c.task;
      EXPECT_EQ(c.samples, 3);
    }
  }
}

// The default Generate: NextToken on the growing prefix, stop tokens kept.
class CountingScorer : public TokenScorer {
 public:
  std::vector<float> Score(const std::vector<int32_t>& t) override {
    return std::vector<float>(t.size() - 1, 0.0f);
  }
  absl::StatusOr<int32_t> NextToken(
      const std::vector<int32_t>& prefix) override {
    return static_cast<int32_t>(prefix.size());
  }
};

TEST(RulerGenerateTest, TheDefaultGenerateExtendsThePrefixAndStops) {
  CountingScorer scorer;
  auto out =
      scorer.Generate({9, 9, 9}, {.max_new_tokens = 4, .stop_tokens = {}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (std::vector<int32_t>{3, 4, 5, 6}));
  out = scorer.Generate({9}, {.max_new_tokens = 10, .stop_tokens = {3}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(
      scorer.Generate({9}, {.max_new_tokens = 0, .stop_tokens = {}}).ok());
  EXPECT_FALSE(
      scorer.Generate({}, {.max_new_tokens = 2, .stop_tokens = {}}).ok());
}

TEST_F(RulerTest, DefaultTasksSkipWhatTheirSourcesOrLengthsCannotHold) {
  RulerSources no_files;
  RulerConfig config;
  config.lengths = {1024};
  config.samples = 1;
  OracleScorer scorer(*bytes_, false);
  auto r = EvaluateRuler(scorer, *bytes_, config, no_files);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> ran;
  for (const auto& [name, score] : r->tasks) ran.push_back(name);
  EXPECT_EQ(ran, (std::vector<std::string>{"fwe", "niah_multikey_2",
                                           "niah_multikey_3", "niah_single_1",
                                           "vt"}));
  const std::string skipped = absl::StrJoin(r->skipped, "\n");
  EXPECT_TRUE(absl::StrContains(skipped, "niah_single_2: needs an essay"));
  EXPECT_TRUE(absl::StrContains(skipped, "qa_1: needs a SQuAD file"));
  EXPECT_TRUE(absl::StrContains(skipped, "cwe at 1024: "));
  EXPECT_TRUE(absl::StrContains(skipped, "use a length of at least"));
}

TEST_F(RulerTest, BadInputIsRefusedNamingTheField) {
  RulerConfig config;
  config.lengths = {2048};
  config.tasks = {"vt", "niah_single_9"};
  EXPECT_TRUE(absl::StrContains(ValidateRulerConfig(config).message(),
                                "tasks[1]: unknown RULER task"));
  config.tasks = {"vt", "vt"};
  EXPECT_TRUE(absl::StrContains(ValidateRulerConfig(config).message(),
                                "tasks[1]: \"vt\" is listed twice"));
  config.tasks = {"vt"};
  config.lengths = {};
  EXPECT_TRUE(
      absl::StartsWith(ValidateRulerConfig(config).message(), "lengths:"));
  config.lengths = {2048, 1};
  EXPECT_TRUE(
      absl::StartsWith(ValidateRulerConfig(config).message(), "lengths[1]:"));
  config.lengths = {2048};
  config.samples = 0;
  EXPECT_TRUE(
      absl::StartsWith(ValidateRulerConfig(config).message(), "samples:"));
  // A named task whose source is missing, or whose length is too short.
  config.samples = 1;
  config.tasks = {"vt", "qa_2"};
  OracleScorer scorer(*bytes_, false);
  auto r = EvaluateRuler(scorer, *bytes_, config, RulerSources{});
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "tasks[1]: qa_2 needs a HotpotQA file"));
  config.tasks = {"cwe"};
  config.lengths = {1024};
  r = EvaluateRuler(scorer, *bytes_, config, sources_);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "cwe: length 1024") ||
              absl::StrContains(r.status().message(), "use a length"))
      << r.status();
  EXPECT_EQ(scorer.calls_, 0);
  // Files: missing, malformed, too short an essay.
  EXPECT_EQ(LoadSquad("/nonexistent/squad.json").status().code(),
            absl::StatusCode::kNotFound);
  auto bad = LoadSquad(TempFile("ruler_bad_squad.json", R"({"data": [{}]})"));
  EXPECT_TRUE(absl::StrContains(bad.status().message(),
                                "data[0] has no paragraphs array"));
  auto hot = LoadHotpotQa(TempFile("ruler_bad_hotpot.json", R"([{"x": 1}])"));
  EXPECT_TRUE(absl::StrContains(hot.status().message(), "[0] needs question"));
  auto essay =
      LoadRulerSources(TempFile("ruler_short.txt", "too short"), "", "");
  EXPECT_TRUE(
      absl::StrContains(essay.status().message(), "the essay has 2 words"));
}

}  // namespace
}  // namespace hlab::eval::ruler
