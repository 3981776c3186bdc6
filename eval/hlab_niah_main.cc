// hlab-niah: prints needle-in-a-haystack samples (eval/niah.h) so a user
// can see what a model is asked: the prompt, the candidates and the answer.
// Scoring models is hlab-eval's job.
//
//   hlab-niah --show single --length 200 --depth 0.5 --seed 0 --index 3
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flag_map.h"
#include "data/tokenizer.h"
#include "eval/niah.h"

namespace {

constexpr char kUsage[] =
    R"(usage: hlab-niah --show KIND --length L [flags]

Prints one needle-in-a-haystack sample (docs/evaluation.md).

  --show KIND          single, multikey, multivalue or passkey
  --length L           tokens of prompt + answer
  --depth D            fraction of the haystack before the needle (0.5)
  --seed S             generator seed (0)
  --index I            sample index (0)
  --candidates C       answers to choose from (8)
  --tokenizer SPEC     byte (default), gpt2:DIR or hf:DIR
  --haystack SOURCE    noise (default) or synthetic
  --corpus-seed N      the synthetic filler's corpus seed (0)
)";

int Fail(const std::string& message) {
  std::cerr << "hlab-niah: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"depth", "0.5"},     {"seed", "0"},         {"index", "0"},
      {"candidates", "8"},  {"tokenizer", "byte"}, {"haystack", "noise"},
      {"corpus-seed", "0"}, {"show", ""},          {"length", ""}};
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
  int64_t length = 0, index = 0;
  uint64_t seed = 0;
  int candidates = 0;
  double depth = 0;
  hlab::eval::NiahHaystack haystack{.source = flags["haystack"],
                                    .corpus_seed = 0};
  if (!absl::SimpleAtoi(flags["length"], &length)) {
    return Fail("--length needs a number, not '" + flags["length"] + "'");
  }
  if (!absl::SimpleAtod(flags["depth"], &depth)) {
    return Fail("--depth needs a number, not '" + flags["depth"] + "'");
  }
  if (!absl::SimpleAtoi(flags["seed"], &seed)) {
    return Fail("--seed needs a number, not '" + flags["seed"] + "'");
  }
  if (!absl::SimpleAtoi(flags["index"], &index)) {
    return Fail("--index needs a number, not '" + flags["index"] + "'");
  }
  if (!absl::SimpleAtoi(flags["candidates"], &candidates)) {
    return Fail("--candidates needs a number, not '" + flags["candidates"] +
                "'");
  }
  if (!absl::SimpleAtoi(flags["corpus-seed"], &haystack.corpus_seed)) {
    return Fail("--corpus-seed needs a number, not '" + flags["corpus-seed"] +
                "'");
  }
  auto tokenizer = hlab::data::MakeTokenizer(flags["tokenizer"]);
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  absl::StatusOr<hlab::eval::NiahSample> s =
      hlab::eval::GenerateNiahSample(**tokenizer, flags["show"], length, depth,
                                     seed, index, candidates, haystack);
  if (!s.ok()) return Fail(s.status().ToString());
  const auto& answer =
      s->candidate_tokens[static_cast<size_t>(s->answer_index)];
  std::cout << "kind " << s->kind << ", " << s->prompt.size()
            << " prompt tokens + " << answer.size()
            << " answer tokens = " << s->length << "; haystack "
            << s->haystack_tokens << " tokens, queried needle after "
            << s->haystack_before << " of them (depth " << s->depth << ")\n";
  for (size_t j = 0; j < s->needle_positions.size(); ++j) {
    std::cout << "needle " << j << " at token " << s->needle_positions[j]
              << (static_cast<int>(j) == s->queried_needle ? " (queried)" : "")
              << "\n";
  }
  std::cout << "--- prompt\n" << (*tokenizer)->Decode(s->prompt) << "\n";
  std::cout << "--- candidates\n";
  for (size_t c = 0; c < s->candidates.size(); ++c) {
    std::cout << c << ": " << s->candidates[c]
              << (static_cast<int>(c) == s->answer_index ? "   <- answer" : "")
              << "\n";
  }
  return 0;
}
