// hlab-ruler: prints RULER samples (eval/ruler/ruler_tasks.h) so a user can
// see what a model is asked: the prompt (its middle elided when long), where
// the answers are stated, and the references. Scoring models is hlab-eval's
// job (evals.ruler).
//
//   hlab-ruler --show all --length 1024
//   hlab-ruler --show niah_single_2 --length 4096 --essay novel.txt
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flag_map.h"
#include "data/tokenizer.h"
#include "eval/ruler/ruler.h"
#include "eval/ruler/ruler_tasks.h"

namespace {

constexpr char kUsage[] =
    R"(usage: hlab-ruler --show TASK|all --length L [flags]

Prints RULER samples (docs/evaluation.md, "RULER").

  --show TASK            a RULER task (niah_single_1 .. niah_multiquery, vt,
                         cwe, fwe, qa_1, qa_2) or "all": one sample of each
                         task whose sources are given
  --length L             tokens of prompt + tokens to generate
  --seed S               generator seed (0)
  --index I              sample index (0)
  --tokenizer SPEC       byte (default), gpt2:DIR or hf:DIR
  --tokens-to-generate N 0: the task's (RULER's)
  --essay FILE           the essay haystack (niah_single_2/3, multikey_1,
                         multivalue, multiquery): any long plain text
  --squad FILE           SQuAD JSON (qa_1)
  --hotpotqa FILE        HotpotQA JSON (qa_2)
  --max-chars N          show at most N characters of each prompt (2000;
                         0: all)
)";

int Fail(const std::string& message) {
  std::cerr << "hlab-ruler: " << message << "\n";
  return 2;
}

std::string Elide(const std::string& text, int64_t max_chars) {
  if (max_chars <= 0 || static_cast<int64_t>(text.size()) <= max_chars) {
    return text;
  }
  const size_t half = static_cast<size_t>(max_chars / 2);
  return absl::StrCat(text.substr(0, half), "\n[... ", text.size() - 2 * half,
                      " characters ...]\n", text.substr(text.size() - half));
}

}  // namespace

int main(int argc, char** argv) {
  namespace ruler = hlab::eval::ruler;
  std::map<std::string, std::string> flags = {
      {"show", ""},         {"length", ""},        {"seed", "0"},
      {"index", "0"},       {"tokenizer", "byte"}, {"tokens-to-generate", "0"},
      {"essay", ""},        {"squad", ""},         {"hotpotqa", ""},
      {"max-chars", "2000"}};
  bool help = false;
  if (absl::Status parsed = hlab::ParseFlagMap(argc, argv, &flags, &help);
      !parsed.ok()) {
    return Fail(std::string(parsed.message()));
  }
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  if (flags["show"].empty() || flags["length"].empty()) {
    std::cerr << kUsage;
    return 2;
  }
  int64_t length = 0, index = 0, generate = 0, max_chars = 0;
  uint64_t seed = 0;
  for (const auto& [flag, out] : std::vector<std::pair<std::string, int64_t*>>{
           {"length", &length},
           {"index", &index},
           {"tokens-to-generate", &generate},
           {"max-chars", &max_chars}}) {
    if (!absl::SimpleAtoi(flags[flag], out)) {
      return Fail("--" + flag + " needs a number, not '" + flags[flag] + "'");
    }
  }
  if (!absl::SimpleAtoi(flags["seed"], &seed)) {
    return Fail("--seed needs a number, not '" + flags["seed"] + "'");
  }
  auto tokenizer = hlab::data::MakeTokenizer(flags["tokenizer"]);
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  absl::StatusOr<ruler::RulerSources> sources = ruler::LoadRulerSources(
      flags["essay"], flags["squad"], flags["hotpotqa"]);
  if (!sources.ok()) return Fail(sources.status().ToString());

  ruler::RulerConfig config;
  if (flags["show"] != "all") config.tasks = {flags["show"]};
  config.lengths = {length};
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<ruler::RulerTaskInfo>> tasks =
      ruler::ResolveRulerTasks(config, *sources, &skipped);
  if (!tasks.ok()) return Fail(tasks.status().ToString());
  int failed = 0;
  for (const ruler::RulerTaskInfo& task : *tasks) {
    absl::StatusOr<ruler::RulerSample> s = ruler::MakeRulerSample(
        task, length, seed, index, **tokenizer, *sources, generate);
    if (!s.ok()) {
      std::cerr << "hlab-ruler: " << s.status().message() << "\n";
      ++failed;
      continue;
    }
    std::cout << "=== " << s->task << ": " << s->prompt.size()
              << " prompt tokens + " << s->tokens_to_generate
              << " to generate = " << s->length << "; " << s->units
              << " haystack units, " << s->padding << " padding tokens; "
              << (task.metric == "part" ? "string_match_part"
                                        : "string_match_all")
              << "\n";
    for (const ruler::Placement& p : s->placements) {
      std::cout << "stated at tokens [" << p.begin << ", " << p.end
                << "): " << Elide(p.text, 160) << "\n";
    }
    std::cout << "answers: " << absl::StrJoin(s->answers, " | ") << "\n";
    std::cout << "--- prompt\n" << Elide(s->text, max_chars) << "\n\n";
  }
  for (const std::string& s : skipped) std::cout << "skipped " << s << "\n";
  if (!skipped.empty()) {
    std::cout << "(here: --essay FILE for essay_file, --squad FILE, "
                 "--hotpotqa FILE)\n";
  }
  return failed == 0 ? 0 : 2;
}
