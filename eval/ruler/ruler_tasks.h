// RULER's synthetic tasks (Hsieh et al. 2024, NVIDIA/RULER; reference notes
// section 3.1), generated the way RULER generates them, with lengths in
// tokens of the evaluated model's tokenizer.
//
// The tasks, in RULER's order (haystack / key / value as RULER's
// synthetic.yaml):
//   niah_single_1    noise / words / numbers
//   niah_single_2    essay / words / numbers
//   niah_single_3    essay / words / uuids
//   niah_multikey_1  essay / words / numbers, 4 keys, one asked
//   niah_multikey_2  needle / words / numbers (the haystack is distractor
//                    needles)
//   niah_multikey_3  needle / uuids / uuids
//   niah_multivalue  essay / words / numbers, 4 values for the key
//   niah_multiquery  essay / words / numbers, 4 keys, all asked
//   vt               variable tracking: one chain of 4 hops in noise
//   cwe              common-words extraction: the 10 most frequent words of a
//                    numbered list (a one-shot example first)
//   fwe              frequent-words extraction: the 3 most frequent coded
//                    words of a zeta(2)-distributed text
//   qa_1, qa_2       question answering on SQuAD / HotpotQA documents (the
//                    gold ones among distractors)
// Needles read "One of the special magic numbers for <key> is: <value>.";
// "words" are adjective-noun pairs (eval/ruler/word_lists.h), numbers have 7
// digits, uuids are version-4 UUIDs. The prompt is RULER's template for a
// base model, ending in its answer prefix ("... The special magic number
// for <key> mentioned in the provided text is"); the model generates
// tokens_to_generate tokens (RULER: niah 128, vt 30, cwe 120, fwe 50, qa
// 32).
//
// Lengths are exact: the prompt has length - tokens_to_generate tokens
// (RULER's max_seq_length counts the generated tokens). The haystack has the
// largest number of units (noise paragraphs, essay words, distractor
// needles, list words, coded words, documents) that fits, as RULER's search
// finds, and the few tokens left are the tail of RULER's noise text at the
// prompt's start. Pieces (units, needles, template parts) are encoded one by
// one and concatenated, so a needle's tokens are the same in every sample.
//
// Invariants, checked for every sample (a sample that breaks one is drawn
// again, at most 16 times, then an error): each answer occurs in the prompt
// exactly where and as often as stated (NIAH: once, in its needle; vt: in
// its chain; cwe/fwe: with the stated counts, strictly above every other
// word's), and the haystack holds no accidental copy of an answer.
// Deviations from RULER: pieces are encoded separately (RULER encodes the
// whole text; identical for byte tokenizers); the padding above; cwe's and
// vt's example words are drawn apart from the sample's; vt has no one-shot
// example.
//
// A sample is a pure function of (task, length, seed, index, tokenizer,
// sources). Thread-safety: free functions, no shared state.
//
//   RulerSources sources;  // the essay text, QA files when used
//   HLAB_ASSIGN_OR_RETURN(RulerSample s, MakeRulerSample(
//       *FindRulerTask("niah_single_1"), 4096, /*seed=*/0, /*index=*/0,
//       tokenizer, sources, /*tokens_to_generate=*/0));
#ifndef HLAB_EVAL_RULER_RULER_TASKS_H_
#define HLAB_EVAL_RULER_RULER_TASKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace hlab::eval::ruler {

struct RulerTaskInfo {
  std::string name;
  std::string family;          // niah, vt, cwe, fwe, qa
  int64_t tokens_to_generate;  // RULER's
  std::string metric;          // "all" (string_match_all) | "part"
  std::string needs;           // "" | "essay" | "squad" | "hotpotqa"
  // NIAH's configuration.
  std::string haystack, key_type, value_type;  // noise|essay|needle; ...
  int keys = 1, values = 1, queries = 1;
};

// Every task, in RULER's order.
const std::vector<RulerTaskInfo>& RulerTasks();
// NotFound naming the task and listing the known ones.
absl::StatusOr<RulerTaskInfo> FindRulerTask(const std::string& name);

// A QA set: questions with their answers and gold documents, and every
// document (distractors are drawn from them).
struct QaExample {
  std::string question;
  std::vector<std::string> answers;
  std::vector<std::string> gold;  // documents, as in `documents`
};
struct QaDataset {
  std::vector<QaExample> examples;
  std::vector<std::string> documents;
};
// SQuAD (v1.1 / v2.0 JSON: data[].paragraphs[].{context, qas[]}; questions
// without answers are skipped) and HotpotQA (the JSON list of the dev sets:
// question, answer, context [[title, [sentences]]], supporting_facts).
// InvalidArgument names the file and what was wrong.
absl::StatusOr<QaDataset> LoadSquad(const std::string& path);
absl::StatusOr<QaDataset> LoadHotpotQa(const std::string& path);

// What tasks read besides the generator: the essay haystack (RULER: Paul
// Graham's essays; any long plain text, whitespace collapsed) and the QA
// sets.
struct RulerSources {
  std::string essay;
  std::optional<QaDataset> squad, hotpotqa;
};

// Reads the sources from files ("" for none): the essay's whitespace is
// collapsed (a UTF-8 BOM dropped), it needs at least 100 words.
absl::StatusOr<RulerSources> LoadRulerSources(const std::string& essay_file,
                                              const std::string& squad_file,
                                              const std::string& hotpotqa_file);

// A token range of the prompt and its text: where an answer is stated.
struct Placement {
  int64_t begin = 0, end = 0;
  std::string text;
};

struct RulerSample {
  std::string task;
  int64_t length = 0, index = 0;
  int64_t tokens_to_generate = 0;
  std::vector<int32_t> prompt;  // length - tokens_to_generate tokens
  std::string text;             // the prompt's text
  std::vector<std::string> answers;
  std::vector<Placement> placements;  // NIAH/vt statements, qa gold docs
  int64_t padding = 0;                // noise tokens at the start
  int64_t units = 0;                  // haystack units
};

// The `index`th sample of `task` at `length` tokens. tokens_to_generate 0:
// the task's. InvalidArgument when the length cannot hold the task (naming
// the least length that can), a source the task needs is missing, or the
// invariants above cannot be met.
absl::StatusOr<RulerSample> MakeRulerSample(const RulerTaskInfo& task,
                                            int64_t length, uint64_t seed,
                                            int64_t index,
                                            const data::Tokenizer& tokenizer,
                                            const RulerSources& sources,
                                            int64_t tokens_to_generate);

}  // namespace hlab::eval::ruler

#endif  // HLAB_EVAL_RULER_RULER_TASKS_H_
