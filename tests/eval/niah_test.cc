// NIAH generators and scoring with scorers of known behaviour (no model).
#include "eval/niah.h"

#include <cmath>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "data/gpt2_tokenizer.h"
#include "data/random.h"
#include "data/synthetic_corpus.h"
#include "gtest/gtest.h"
#include "tests/data/test_util.h"

namespace hlab::eval {
namespace {

const std::vector<double> kDepths = {0.0, 0.1, 0.37, 0.5, 0.9, 1.0};
const std::vector<int64_t> kLengths = {300, 517, 1000};

NiahSample Generate(const data::Tokenizer& tok, const std::string& kind,
                    int64_t length, double depth, int64_t index,
                    uint64_t seed = 3, int candidates = 8,
                    const NiahHaystack& haystack = NiahHaystack()) {
  absl::StatusOr<NiahSample> s = GenerateNiahSample(
      tok, kind, length, depth, seed, index, candidates, haystack);
  EXPECT_TRUE(s.ok()) << kind << " " << length << " " << depth << ": "
                      << s.status();
  return s.ok() ? *std::move(s) : NiahSample();
}

std::string Text(const data::Tokenizer& tok, const std::vector<int32_t>& ids,
                 int64_t begin, int64_t end) {
  return tok.Decode(
      std::vector<int32_t>(ids.begin() + begin, ids.begin() + end));
}

// The question at the end of the prompt, in tokens.
int64_t QuestionTokens(const data::Tokenizer& tok, const NiahSample& s) {
  const std::string text = tok.Decode(s.prompt);
  // The corpus format's question is the recall's key letter alone.
  const bool corpus_format = text.rfind("recall ") == std::string::npos;
  const std::string question =
      s.kind == "passkey" ? "What is the pass key? The pass key is "
      : corpus_format     ? text.substr(text.size() - 1)
                          : text.substr(text.rfind("recall "));
  EXPECT_EQ(text.substr(text.size() - question.size()), question);
  return static_cast<int64_t>(tok.Encode(question).size());
}

// The haystack's text: the prompt without preamble, needles and question.
std::string HaystackText(const data::Tokenizer& tok, const NiahSample& s) {
  std::vector<int32_t> noise;
  const int64_t end =
      static_cast<int64_t>(s.prompt.size()) - QuestionTokens(tok, s);
  size_t next = 0;
  for (int64_t i = s.haystack_start; i < end; ++i) {
    if (next < s.needle_positions.size() && i == s.needle_positions[next]) {
      i += s.needle_lengths[next++] - 1;
      continue;
    }
    noise.push_back(s.prompt[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(next, s.needle_positions.size());
  return tok.Decode(noise);
}

std::vector<std::string> NeedleTexts(const data::Tokenizer& tok,
                                     const NiahSample& s) {
  std::vector<std::string> out;
  for (size_t j = 0; j < s.needle_positions.size(); ++j) {
    out.push_back(Text(tok, s.prompt, s.needle_positions[j],
                       s.needle_positions[j] + s.needle_lengths[j]));
  }
  return out;
}

TEST(NiahGeneratorTest, SamplesAreAPureFunctionOfTheirCoordinates) {
  auto tok = data::MakeByteTokenizer();
  for (const std::string& kind : NiahKinds()) {
    const NiahSample a = Generate(*tok, kind, 300, 0.5, 7);
    const NiahSample b = Generate(*tok, kind, 300, 0.5, 7);
    EXPECT_EQ(a.prompt, b.prompt) << kind;
    EXPECT_EQ(a.candidates, b.candidates) << kind;
    EXPECT_EQ(a.answer_index, b.answer_index) << kind;
    const NiahSample other = Generate(*tok, kind, 300, 0.5, 8);
    EXPECT_NE(a.candidates, other.candidates) << kind;
    const NiahSample reseeded = Generate(*tok, kind, 300, 0.5, 7, 4);
    EXPECT_NE(a.candidates, reseeded.candidates) << kind;
  }
}

TEST(NiahGeneratorTest, LengthsAreExact) {
  auto tok = data::MakeByteTokenizer();
  for (const std::string& kind : NiahKinds()) {
    for (int64_t length : kLengths) {
      for (double depth : kDepths) {
        for (int64_t i = 0; i < 3; ++i) {
          const NiahSample s = Generate(*tok, kind, length, depth, i);
          ASSERT_EQ(s.candidates.size(), 8u);
          for (const auto& c : s.candidate_tokens) {
            EXPECT_EQ(static_cast<int64_t>(s.prompt.size() + c.size()), length)
                << kind << " " << length << " " << depth;
          }
        }
      }
    }
  }
}

TEST(NiahGeneratorTest, TheQueriedNeedleSitsAtItsDepth) {
  auto tok = data::MakeByteTokenizer();
  for (const std::string& kind : NiahKinds()) {
    for (int64_t length : kLengths) {
      for (double depth : kDepths) {
        const NiahSample s = Generate(*tok, kind, length, depth, 1);
        // Noise tokens before the queried needle, counted in the prompt.
        int64_t needles_before = 0;
        for (int j = 0; j < s.queried_needle; ++j) {
          needles_before += s.needle_lengths[static_cast<size_t>(j)];
        }
        const int64_t noise_before =
            s.needle_positions[static_cast<size_t>(s.queried_needle)] -
            s.haystack_start - needles_before;
        EXPECT_LE(std::abs(static_cast<double>(noise_before) -
                           depth * static_cast<double>(s.haystack_tokens)),
                  1.0)
            << kind << " " << length << " " << depth;
        // The haystack is everything else.
        int64_t needle_tokens = 0;
        for (int64_t n : s.needle_lengths) needle_tokens += n;
        EXPECT_EQ(s.haystack_start + s.haystack_tokens + needle_tokens +
                      QuestionTokens(*tok, s),
                  static_cast<int64_t>(s.prompt.size()))
            << kind;
        EXPECT_EQ(static_cast<int64_t>(HaystackText(*tok, s).size()),
                  s.haystack_tokens);
      }
    }
  }
}

TEST(NiahConfigTest, TheCorpusFormatRefusesMultivalueAndTooManyCandidates) {
  NiahConfig config;
  config.context_lengths = {256};
  config.haystack.source = "synthetic";
  EXPECT_NE(ValidateNiahConfig(config).message().find("kinds: multivalue"),
            absl::string_view::npos);
  config.kinds = NiahKindsFor(config.haystack);
  EXPECT_EQ(config.kinds,
            (std::vector<std::string>{"single", "multikey", "passkey"}));
  EXPECT_TRUE(ValidateNiahConfig(config).ok());
  config.candidates = 11;
  EXPECT_NE(ValidateNiahConfig(config).message().find("candidates: at most 10"),
            absl::string_view::npos);
}

TEST(NiahGeneratorTest, NeedlesFollowTheTrainingCorpusFormat) {
  auto tok = data::MakeByteTokenizer();
  const NiahSample s = Generate(*tok, "single", 200, 0.5, 0);
  const std::string answer = s.candidates[static_cast<size_t>(s.answer_index)];
  const std::string prompt = tok->Decode(s.prompt);
  const std::string key = prompt.substr(prompt.size() - 8, 4);
  EXPECT_EQ(prompt.substr(prompt.size() - 15), "recall " + key + " is ");
  EXPECT_EQ(NeedleTexts(*tok, s),
            std::vector<std::string>{"key " + key + " is " + answer + ". "});
  EXPECT_EQ(answer.size(), 4u);

  const NiahSample p = Generate(*tok, "passkey", 400, 0.5, 0);
  const std::string pass = p.candidates[static_cast<size_t>(p.answer_index)];
  EXPECT_EQ(
      NeedleTexts(*tok, p),
      std::vector<std::string>{"The pass key is " + pass + ". Remember it. " +
                               pass + " is the pass key. "});
  EXPECT_EQ(tok->Decode(p.prompt).rfind("There is important info", 0), 0u);
}

TEST(NiahGeneratorTest, AnswersAreInTheirNeedlesAndNeverInTheHaystack) {
  auto tok = data::MakeByteTokenizer();
  for (const NiahHaystack& haystack :
       {NiahHaystack(),
        NiahHaystack{.source = "synthetic", .corpus_seed = 5}}) {
    const bool corpus_format = haystack.source == "synthetic";
    for (const std::string& kind : NiahKindsFor(haystack)) {
      for (int64_t i = 0; i < 20; ++i) {
        const NiahSample s = Generate(*tok, kind, 600, 0.3, i, 3, 8, haystack);
        if (corpus_format && kind != "passkey") {
          // "<C7>. " needles; the question is the queried key's letter and
          // the answer its value digit; multikey's keys are distinct.
          std::set<int> keys;
          for (int64_t at : s.needle_positions) {
            const int32_t b = s.prompt[static_cast<size_t>(at)];
            ASSERT_GE(b, data::kFirstBindingToken) << kind;
            keys.insert((b - data::kFirstBindingToken) /
                        data::kSyntheticValues);
          }
          EXPECT_EQ(keys.size(), s.needle_positions.size()) << kind;
          const int32_t queried = s.prompt[static_cast<size_t>(
              s.needle_positions[static_cast<size_t>(s.queried_needle)])];
          const int key =
              (queried - data::kFirstBindingToken) / data::kSyntheticValues;
          EXPECT_EQ(s.prompt.back(), data::KeyLetter(key)) << kind;
          EXPECT_EQ(s.candidates[static_cast<size_t>(s.answer_index)],
                    std::string(1, data::ValueDigit(
                                       (queried - data::kFirstBindingToken) %
                                       data::kSyntheticValues)))
              << kind;
          const std::string hay = HaystackText(*tok, s);
          EXPECT_EQ(hay.find_first_of("0123456789ABCDEFGHIJKL"),
                    std::string::npos);
          continue;
        }
        const std::string hay = HaystackText(*tok, s);
        EXPECT_EQ(hay.find_first_of("0123456789"), std::string::npos)
            << kind << " " << haystack.source;
        const std::string answer =
            s.candidates[static_cast<size_t>(s.answer_index)];
        const std::vector<std::string> needles = NeedleTexts(*tok, s);
        // Needles and the question follow a full stop (after a one-token
        // segment, the tail of ". " is " ").
        std::vector<int64_t> starts = s.needle_positions;
        starts.push_back(static_cast<int64_t>(s.prompt.size()) -
                         QuestionTokens(*tok, s));
        for (int64_t at : starts) {
          if (at < 3) continue;
          const std::string before = Text(*tok, s.prompt, at - 3, at);
          EXPECT_TRUE(before.substr(1) == ". " || before == ".  ")
              << kind << " " << at << " '" << before << "'";
        }
        if (kind == "multivalue") {
          // The answer lists the needles' values in text order.
          std::string expected;
          for (const std::string& n : needles) {
            if (!expected.empty()) expected += ", ";
            expected += n.substr(12, 4);  // "key QZXW is 4821. "
          }
          EXPECT_EQ(answer, expected);
        } else {
          EXPECT_NE(needles[static_cast<size_t>(s.queried_needle)].find(answer),
                    std::string::npos)
              << kind;
        }
        if (kind == "multikey") {
          // Distinct keys; the question asks the queried needle's key.
          std::set<std::string> keys;
          for (const std::string& n : needles) keys.insert(n.substr(4, 4));
          EXPECT_EQ(keys.size(), 4u);
          const std::string prompt = tok->Decode(s.prompt);
          EXPECT_EQ(
              prompt.substr(prompt.size() - 8, 4),
              needles[static_cast<size_t>(s.queried_needle)].substr(4, 4));
        }
      }
    }
  }
}

TEST(NiahGeneratorTest, CandidatesAreDistinctAndHoldTheAnswerOnce) {
  auto tok = data::MakeByteTokenizer();
  std::map<int, int> answer_slots;
  for (const std::string& kind : NiahKinds()) {
    for (int candidates : {2, 8, 20}) {
      for (int64_t i = 0; i < 10; ++i) {
        const NiahSample s = Generate(*tok, kind, 300, 0.5, i, 3, candidates);
        ASSERT_EQ(static_cast<int>(s.candidates.size()), candidates);
        EXPECT_EQ(
            std::set<std::string>(s.candidates.begin(), s.candidates.end())
                .size(),
            s.candidates.size())
            << kind;
        ASSERT_GE(s.answer_index, 0);
        ASSERT_LT(s.answer_index, candidates);
        if (candidates == 8) ++answer_slots[s.answer_index];
        if (kind == "multikey" && candidates == 8) {
          // The other keys' values are the first distractors.
          const std::vector<std::string> needles = NeedleTexts(*tok, s);
          for (size_t j = 0; j < needles.size(); ++j) {
            const std::string v = needles[j].substr(12, 4);
            EXPECT_NE(std::find(s.candidates.begin(), s.candidates.end(), v),
                      s.candidates.end());
          }
        }
      }
    }
  }
  EXPECT_GT(answer_slots.size(), 4u);  // the true index varies
}

TEST(NiahGeneratorTest, OtherTokenizersGetExactLengths) {
  const std::string dir = data::testing::SharedDataPath("tokenizers/gpt2");
  if (dir.empty()) GTEST_SKIP() << "no GPT-2 tokenizer files";
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tok =
      data::MakeTokenizer("gpt2:" + dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const std::string& kind : NiahKinds()) {
    for (double depth : {0.0, 0.5, 1.0}) {
      const NiahSample s = Generate(**tok, kind, 150, depth, 2);
      const auto& answer =
          s.candidate_tokens[static_cast<size_t>(s.answer_index)];
      EXPECT_EQ(static_cast<int64_t>(s.prompt.size() + answer.size()), 150)
          << kind;
    }
  }
}

TEST(NiahGeneratorTest, BadArgumentsNameTheField) {
  auto tok = data::MakeByteTokenizer();
  struct Case {
    std::string kind;
    int64_t length;
    double depth;
    int candidates;
    std::string source, field;
  };
  for (const Case& c : std::vector<Case>{
           {"needle", 200, 0.5, 8, "noise", "kind"},
           {"single", 200, 1.5, 8, "noise", "depth"},
           {"single", 200, 0.5, 1, "noise", "candidates"},
           {"single", 200, 0.5, 8, "essay", "haystack.source"},
           {"single", 30, 0.5, 8, "noise", "context_lengths"},
           {"passkey", 100, 0.5, 8, "noise", "context_lengths"}}) {
    absl::StatusOr<NiahSample> s =
        GenerateNiahSample(*tok, c.kind, c.length, c.depth, 0, 0, c.candidates,
                           NiahHaystack{.source = c.source, .corpus_seed = 0});
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(s.status().message()).rfind(c.field + ":", 0), 0u)
        << s.status();
  }
  // The shortest length that holds a single needle: no haystack at all.
  const NiahSample tight = Generate(*tok, "single", 37, 0.5, 0);
  EXPECT_EQ(tight.haystack_tokens, 0);
  EXPECT_FALSE(GenerateNiahSample(*tok, "single", 36, 0.5, 0, 0, 8).ok());
}

TEST(NiahConfigTest, BadConfigsNameTheField) {
  NiahConfig good;
  good.context_lengths = {256};
  EXPECT_TRUE(ValidateNiahConfig(good).ok());
  std::vector<std::pair<NiahConfig, std::string>> cases;
  auto add = [&](auto mutate, const std::string& field) {
    NiahConfig c = good;
    mutate(c);
    cases.emplace_back(c, field);
  };
  add([](NiahConfig& c) { c.kinds = {}; }, "kinds");
  add([](NiahConfig& c) { c.kinds = {"single", "essay"}; }, "kinds[1]");
  add([](NiahConfig& c) { c.kinds = {"single", "single"}; }, "kinds[1]");
  add([](NiahConfig& c) { c.context_lengths = {}; }, "context_lengths");
  add(
      [](NiahConfig& c) {
        c.context_lengths = {256, 0};
      },
      "context_lengths[1]");
  add([](NiahConfig& c) { c.depths = {}; }, "depths");
  add([](NiahConfig& c) { c.depths = {0.5, -0.1}; }, "depths[1]");
  add([](NiahConfig& c) { c.depths = {std::nan("")}; }, "depths[0]");
  add([](NiahConfig& c) { c.samples = 0; }, "samples");
  add([](NiahConfig& c) { c.candidates = 101; }, "candidates");
  add([](NiahConfig& c) { c.haystack.source = "essay"; }, "haystack.source");
  for (const auto& [config, field] : cases) {
    const absl::Status st = ValidateNiahConfig(config);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_EQ(std::string(st.message()).rfind(field + ":", 0), 0u) << st;
  }
}

// Knows every sample's answer: NLL 0 on a true sequence's tokens, 1 on any
// other; decodes the true continuation.
class OracleScorer final : public TokenScorer {
 public:
  explicit OracleScorer(std::vector<std::vector<int32_t>> truths) {
    for (auto& t : truths) truths_.insert(std::move(t));
  }
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    ++calls_;
    const float nll = truths_.count(tokens) ? 0.0f : 1.0f;
    return std::vector<float>(tokens.size() - 1, nll);
  }
  absl::StatusOr<int32_t> NextToken(
      const std::vector<int32_t>& prefix) override {
    for (const auto& t : truths_) {
      if (t.size() > prefix.size() &&
          std::equal(prefix.begin(), prefix.end(), t.begin())) {
        return t[prefix.size()];
      }
    }
    return 0;
  }
  int64_t calls_ = 0;

 private:
  std::set<std::vector<int32_t>> truths_;
};

// Scores independent of the answer: a hash of the sequence, or constant.
class BlindScorer final : public TokenScorer {
 public:
  explicit BlindScorer(bool constant) : constant_(constant) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override {
    uint64_t h = 0;
    for (int32_t t : tokens) h = data::MixSeeds(h, static_cast<uint64_t>(t));
    const float nll =
        constant_ ? 1.0f : static_cast<float>(data::Rng(h).UniformReal());
    return std::vector<float>(tokens.size() - 1, nll);
  }

 private:
  bool constant_;
};

NiahConfig SmallConfig() {
  NiahConfig config;
  config.context_lengths = {300, 400};
  config.samples = 5;
  return config;
}

std::vector<std::vector<int32_t>> Truths(const data::Tokenizer& tok,
                                         const NiahConfig& config) {
  std::vector<std::vector<int32_t>> truths;
  for (const std::string& kind : config.kinds) {
    for (int64_t length : config.context_lengths) {
      for (double depth : config.depths) {
        for (int64_t i = 0; i < config.samples; ++i) {
          const NiahSample s = Generate(tok, kind, length, depth, i,
                                        config.seed, config.candidates);
          truths.push_back(NiahSequence(s, s.answer_index));
        }
      }
    }
  }
  return truths;
}

TEST(NiahScoringTest, AnOracleIsAlwaysRight) {
  auto tok = data::MakeByteTokenizer();
  NiahConfig config = SmallConfig();
  config.greedy = true;
  OracleScorer oracle(Truths(*tok, config));
  int64_t progress_calls = 0;
  absl::StatusOr<NiahResult> r =
      EvaluateNiah(oracle, *tok, config, [&](int64_t done, int64_t total) {
        EXPECT_EQ(done, ++progress_calls);
        EXPECT_EQ(total, 24);
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(progress_calls, 24);
  ASSERT_EQ(r->cells.size(), 4u * 2 * 3);  // kinds x lengths x depths
  EXPECT_EQ(r->samples, 24 * 5);
  EXPECT_EQ(r->accuracy, 1.0);
  EXPECT_EQ(r->greedy_accuracy, 1.0);
  for (const auto& [kind, acc] : r->accuracy_by_kind) EXPECT_EQ(acc, 1.0);
  EXPECT_EQ(r->accuracy_by_kind.size(), 4u);
  for (const NiahCell& c : r->cells) {
    EXPECT_EQ(c.samples, 5);
    EXPECT_EQ(c.correct, 5);
    EXPECT_EQ(c.greedy_correct, 5);
  }
  EXPECT_EQ(r->cells[0].kind, "single");
  EXPECT_EQ(r->cells[0].context_length, 300);
  EXPECT_EQ(r->cells[1].depth, 0.5);
}

TEST(NiahScoringTest, AScorerBlindToTheAnswerIsRightOneTimeInEight) {
  auto tok = data::MakeByteTokenizer();
  NiahConfig config = SmallConfig();
  config.samples = 50;  // 1200 samples
  // Binomial(1200, 1/8): sd of the accuracy = sqrt(p(1-p)/n) = 0.0095; allow
  // 4 sd. Fixed seeds make the outcome deterministic.
  const double tolerance = 4 * std::sqrt(0.125 * 0.875 / 1200);
  for (bool constant : {false, true}) {
    BlindScorer blind(constant);
    absl::StatusOr<NiahResult> r = EvaluateNiah(blind, *tok, config);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->samples, 1200);
    EXPECT_NEAR(r->accuracy, 0.125, tolerance) << "constant " << constant;
  }
}

TEST(NiahScoringTest, GreedyNeedsAScorerThatDecodes) {
  auto tok = data::MakeByteTokenizer();
  NiahConfig config = SmallConfig();
  config.greedy = true;
  BlindScorer blind(false);
  absl::StatusOr<NiahResult> r = EvaluateNiah(blind, *tok, config);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(NiahScoringTest, ErrorsOfTheConfigAndOfLengthsReachTheCaller) {
  auto tok = data::MakeByteTokenizer();
  BlindScorer blind(false);
  NiahConfig config = SmallConfig();
  config.depths = {2};
  EXPECT_EQ(EvaluateNiah(blind, *tok, config).status().code(),
            absl::StatusCode::kInvalidArgument);
  config = SmallConfig();
  config.context_lengths = {300, 20};
  absl::Status st = EvaluateNiah(blind, *tok, config).status();
  EXPECT_EQ(std::string(st.message()).rfind("context_lengths:", 0), 0u) << st;
}

TEST(NiahScoringTest, JsonHasTheCellsTable) {
  auto tok = data::MakeByteTokenizer();
  NiahConfig config = SmallConfig();
  config.kinds = {"single", "passkey"};
  config.greedy = true;
  OracleScorer oracle(Truths(*tok, config));
  absl::StatusOr<NiahResult> r = EvaluateNiah(oracle, *tok, config);
  ASSERT_TRUE(r.ok()) << r.status();
  const nlohmann::json j = nlohmann::json::parse(NiahResultToJson(*r));
  EXPECT_EQ(j["samples"], 60);
  EXPECT_EQ(j["candidates"], 8);
  EXPECT_EQ(j["accuracy"], 1.0);
  EXPECT_EQ(j["greedy_accuracy"], 1.0);
  EXPECT_EQ(j["accuracy_by_kind"]["passkey"], 1.0);
  ASSERT_EQ(j["cells"].size(), 12u);
  const nlohmann::json& last = j["cells"][11];
  EXPECT_EQ(last["kind"], "passkey");
  EXPECT_EQ(last["context_length"], 400);
  EXPECT_EQ(last["depth"], 0.9);
  EXPECT_EQ(last["samples"], 5);
  EXPECT_EQ(last["correct"], 5);
  EXPECT_EQ(last["greedy_correct"], 5);
}

}  // namespace
}  // namespace hlab::eval
