#include "eval/niah.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/random.h"
#include "data/synthetic_corpus.h"

namespace hlab::eval {
namespace {

constexpr int kMaxCandidates = 100;
constexpr int kMultiNeedles = 4;  // RULER's multikey k and multivalue v
constexpr int kKeyLetters = 4;    // as data/synthetic_corpus.cc

// RULER's noise haystack and the classic pass-key prompt (Mohtashami &
// Jaggi 2023).
constexpr char kNoise[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. "
    "There and back again. ";
constexpr char kPasskeyPreamble[] =
    "There is important info hidden inside a lot of irrelevant text. Find it "
    "and memorize them. I will quiz you about the important information "
    "there. ";
constexpr char kPasskeyQuestion[] = "What is the pass key? The pass key is ";

bool KnownKind(const std::string& kind) {
  const std::vector<std::string> kinds = NiahKinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

uint64_t SampleSeed(uint64_t seed, const std::string& kind, int64_t length,
                    double depth, int64_t index) {
  uint64_t kind_hash = 0xCBF29CE484222325ULL;  // FNV-1a
  for (char c : kind) {
    kind_hash = (kind_hash ^ static_cast<uint8_t>(c)) * 0x100000001B3ULL;
  }
  uint64_t depth_bits = 0;
  std::memcpy(&depth_bits, &depth, sizeof(depth_bits));
  uint64_t h = data::MixSeeds(seed, 0x4E1A4ULL);
  h = data::MixSeeds(h, kind_hash);
  h = data::MixSeeds(h, static_cast<uint64_t>(length));
  h = data::MixSeeds(h, depth_bits);
  return data::MixSeeds(h, static_cast<uint64_t>(index));
}

std::string Key(data::Rng& rng) {
  std::string key;
  for (int i = 0; i < kKeyLetters; ++i) {
    key.push_back(static_cast<char>('A' + rng.Uniform(26)));
  }
  return key;
}

// A value of `digits` digits (no leading zero for the 5-digit pass key).
std::string Value(data::Rng& rng, int digits) {
  std::string value;
  for (int i = 0; i < digits; ++i) {
    const int64_t lo = (digits == 5 && i == 0) ? 1 : 0;
    value.push_back(static_cast<char>('0' + lo + rng.Uniform(10 - lo)));
  }
  return value;
}

// A value not in `used`; adds it.
std::string FreshValue(data::Rng& rng, int digits,
                       std::set<std::string>& used) {
  std::string v;
  do {
    v = Value(rng, digits);
  } while (!used.insert(v).second);
  return v;
}

// The haystack's sentences, each tokenized on its own: RULER's noise
// sentences in turn, or the filler sentences of synthetic corpus documents.
class SentenceStream {
 public:
  SentenceStream(const data::Tokenizer& tokenizer, const NiahHaystack& haystack,
                 bool noise_only, data::Rng& rng)
      : tokenizer_(tokenizer),
        synthetic_(haystack.source == "synthetic" && !noise_only),
        corpus_seed_(haystack.corpus_seed),
        document_(rng.Uniform(int64_t{1} << 40)) {}

  absl::StatusOr<std::vector<int32_t>> Next() {
    if (!synthetic_) {
      const std::string text(kNoise);
      size_t begin = 0;
      for (int64_t i = 0; i < noise_index_; ++i) {
        begin = text.find(". ", begin) + 2;
      }
      const size_t end = text.find(". ", begin) + 2;
      noise_index_ = end == text.size() ? 0 : noise_index_ + 1;
      return tokenizer_.Encode(text.substr(begin, end - begin));
    }
    while (pending_.empty()) {
      data::SyntheticCorpusConfig c;
      c.seed = corpus_seed_;
      c.split = data::Split::kHeldOut;
      c.min_length = c.max_length = kFillerDocument;
      c.binding_rate = 0;  // filler sentences only
      HLAB_ASSIGN_OR_RETURN(data::Document doc,
                            data::SyntheticCorpus(c).GetDocument(document_++));
      const std::string text(doc.tokens.begin(), doc.tokens.end());
      // Whole sentences only: the document is cut at its length.
      for (size_t begin = 0, end;
           (end = text.find(". ", begin)) != std::string::npos;
           begin = end + 2) {
        pending_.push_back(text.substr(begin, end + 2 - begin));
      }
    }
    const std::string sentence = pending_.front();
    pending_.pop_front();
    return tokenizer_.Encode(sentence);
  }

 private:
  static constexpr int64_t kFillerDocument = 1024;

  const data::Tokenizer& tokenizer_;
  const bool synthetic_;
  const uint64_t corpus_seed_;
  int64_t document_;
  int64_t noise_index_ = 0;
  std::deque<std::string> pending_;
};

// A haystack segment of exactly `tokens` tokens that ends at a sentence end
// (the tail of the next sentences of `stream`), so every needle and the
// question follow a full stop as in the training corpus.
absl::StatusOr<std::vector<int32_t>> HaystackSegment(SentenceStream& stream,
                                                     int64_t tokens) {
  std::vector<int32_t> ids;
  while (static_cast<int64_t>(ids.size()) < tokens) {
    HLAB_ASSIGN_OR_RETURN(std::vector<int32_t> sentence, stream.Next());
    ids.insert(ids.end(), sentence.begin(), sentence.end());
  }
  return std::vector<int32_t>(ids.end() - tokens, ids.end());
}

// The kind-specific text of a sample before tokenization.
struct Layout {
  std::string preamble, question;
  std::vector<std::string> needles;  // needles[0] is the queried one
  std::vector<std::string> values;   // values[j] belongs to needles[j]
};

// Digits of a kind's values: the pass key's 5, the text format's 4, one in
// the corpus format (a binding token's value).
int ValueDigits(const std::string& kind, bool corpus_format) {
  if (kind == "passkey") return 5;
  return corpus_format ? 1 : 4;
}

Layout DrawLayout(const std::string& kind, bool corpus_format, data::Rng& rng,
                  std::set<std::string>& used_values) {
  Layout l;
  if (kind == "passkey") {
    const std::string v = FreshValue(rng, 5, used_values);
    l.preamble = kPasskeyPreamble;
    l.needles = {absl::StrCat("The pass key is ", v, ". Remember it. ", v,
                              " is the pass key. ")};
    l.values = {v};
    l.question = kPasskeyQuestion;
    return l;
  }
  const int needles = kind == "single" ? 1 : kMultiNeedles;
  if (corpus_format) {
    // The corpus's own sentences: binding tokens "<b>. " and the recall's
    // key letter (multivalue is refused by the config check).
    std::vector<int> keys;
    while (static_cast<int>(keys.size()) < needles) {
      const int k = static_cast<int>(rng.Uniform(data::kSyntheticKeys));
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        keys.push_back(k);
      }
    }
    for (int j = 0; j < needles; ++j) {
      l.values.push_back(FreshValue(rng, 1, used_values));
      l.needles.push_back(data::BindingSentence(keys[static_cast<size_t>(j)],
                                                l.values.back()[0] - '0'));
    }
    l.question = std::string(1, data::KeyLetter(keys[0]));
    return l;
  }
  std::vector<std::string> keys;
  if (kind == "multikey") {
    std::set<std::string> used_keys;
    while (static_cast<int>(keys.size()) < needles) {
      std::string k = Key(rng);
      if (used_keys.insert(k).second) keys.push_back(k);
    }
  } else {
    keys.assign(static_cast<size_t>(needles), Key(rng));
  }
  for (int j = 0; j < needles; ++j) {
    l.values.push_back(FreshValue(rng, 4, used_values));
    l.needles.push_back(absl::StrCat("key ", keys[static_cast<size_t>(j)],
                                     " is ", l.values.back(), ". "));
  }
  l.question = absl::StrCat("recall ", keys[0], " is ");
  return l;
}

// Distinct distractor answers: multivalue lists with some values replaced;
// multikey's first distractors are the other keys' values.
std::vector<std::string> DrawDistractors(const std::string& kind,
                                         bool corpus_format, const Layout& l,
                                         int count, data::Rng& rng,
                                         std::set<std::string>& used_values) {
  std::vector<std::string> out;
  if (kind == "multivalue") {
    const std::vector<std::string>& truth = l.values;
    std::set<std::string> lists = {absl::StrJoin(truth, ", ")};
    while (static_cast<int>(out.size()) < count) {
      std::vector<std::string> list = truth;
      bool changed = false;
      for (std::string& v : list) {
        if (rng.Uniform(2) == 0) {
          v = FreshValue(rng, 4, used_values);
          changed = true;
        }
      }
      if (!changed) continue;
      std::string joined = absl::StrJoin(list, ", ");
      if (lists.insert(joined).second) out.push_back(std::move(joined));
    }
    return out;
  }
  if (kind == "multikey") {
    for (size_t j = 1;
         j < l.values.size() && static_cast<int>(out.size()) < count; ++j) {
      out.push_back(l.values[j]);
    }
  }
  const int digits = ValueDigits(kind, corpus_format);
  while (static_cast<int>(out.size()) < count) {
    out.push_back(FreshValue(rng, digits, used_values));
  }
  return out;
}

// The corpus format has one binding per key and 10 values.
absl::Status CheckCorpusFormat(const std::string& kind, int64_t candidates,
                               const NiahHaystack& haystack) {
  if (haystack.source != "synthetic") return absl::OkStatus();
  if (kind == "multivalue") {
    return absl::InvalidArgumentError(
        "kinds: multivalue needs haystack 'noise' (the synthetic corpus "
        "never binds one key to several values)");
  }
  if (kind != "passkey" && candidates > data::kSyntheticValues) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidates: at most ", data::kSyntheticValues,
                     " with haystack 'synthetic' (a binding's value is one of ",
                     data::kSyntheticValues, " digits), got ", candidates));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> NiahKinds() {
  return {"single", "multikey", "multivalue", "passkey"};
}

std::vector<std::string> NiahKindsFor(const NiahHaystack& haystack) {
  std::vector<std::string> kinds = NiahKinds();
  if (haystack.source == "synthetic") {
    kinds.erase(std::find(kinds.begin(), kinds.end(), "multivalue"));
  }
  return kinds;
}

absl::Status ValidateNiahConfig(const NiahConfig& config) {
  if (config.kinds.empty()) {
    return absl::InvalidArgumentError(
        "kinds: must name at least one of single, multikey, multivalue, "
        "passkey");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < config.kinds.size(); ++i) {
    const std::string& k = config.kinds[i];
    if (!KnownKind(k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kinds[", i, "]: unknown kind '", k,
                       "' (single, multikey, multivalue, passkey)"));
    }
    if (!seen.insert(k).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kinds[", i, "]: '", k, "' is listed twice"));
    }
  }
  if (config.context_lengths.empty()) {
    return absl::InvalidArgumentError(
        "context_lengths: must list at least one length in tokens");
  }
  for (size_t i = 0; i < config.context_lengths.size(); ++i) {
    if (config.context_lengths[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("context_lengths[", i, "]: must be >= 1 token, got ",
                       config.context_lengths[i]));
    }
  }
  if (config.depths.empty()) {
    return absl::InvalidArgumentError(
        "depths: must list at least one depth in [0, 1]");
  }
  for (size_t i = 0; i < config.depths.size(); ++i) {
    if (!(config.depths[i] >= 0 && config.depths[i] <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "depths[", i, "]: must be in [0, 1], got ", config.depths[i]));
    }
  }
  if (config.samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples: must be >= 1, got ", config.samples));
  }
  if (config.candidates < 2 || config.candidates > kMaxCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidates: must be in [2, ", kMaxCandidates, "], got ",
                     config.candidates));
  }
  if (config.haystack.source != "noise" &&
      config.haystack.source != "synthetic") {
    return absl::InvalidArgumentError(
        absl::StrCat("haystack.source: must be 'noise' or 'synthetic', got '",
                     config.haystack.source, "'"));
  }
  for (const std::string& kind : config.kinds) {
    HLAB_RETURN_IF_ERROR(
        CheckCorpusFormat(kind, config.candidates, config.haystack));
  }
  return absl::OkStatus();
}

absl::StatusOr<NiahSample> GenerateNiahSample(const data::Tokenizer& tokenizer,
                                              const std::string& kind,
                                              int64_t length, double depth,
                                              uint64_t seed, int64_t index,
                                              int candidates,
                                              const NiahHaystack& haystack) {
  if (!KnownKind(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kind: unknown '", kind, "' (single, multikey, multivalue, passkey)"));
  }
  if (!(depth >= 0 && depth <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth: must be in [0, 1], got ", depth));
  }
  if (candidates < 2 || candidates > kMaxCandidates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "candidates: must be in [2, ", kMaxCandidates, "], got ", candidates));
  }
  if (haystack.source != "noise" && haystack.source != "synthetic") {
    return absl::InvalidArgumentError(
        absl::StrCat("haystack.source: must be 'noise' or 'synthetic', got '",
                     haystack.source, "'"));
  }
  data::Rng rng(SampleSeed(seed, kind, length, depth, index));
  const bool corpus_format = haystack.source == "synthetic";
  HLAB_RETURN_IF_ERROR(CheckCorpusFormat(kind, candidates, haystack));
  std::set<std::string> used_values;
  const Layout layout = DrawLayout(kind, corpus_format, rng, used_values);
  const int needles = static_cast<int>(layout.needles.size());

  // Multivalue lists its values in text order: value r goes to the needle
  // at the r-th haystack offset, so the answer is known before placement.
  const std::string answer = kind == "multivalue"
                                 ? absl::StrJoin(layout.values, ", ")
                                 : layout.values[0];
  std::vector<int32_t> preamble = tokenizer.Encode(layout.preamble);
  std::vector<int32_t> question = tokenizer.Encode(layout.question);
  std::vector<std::vector<int32_t>> needle_tokens;
  int64_t fixed = static_cast<int64_t>(preamble.size() + question.size());
  for (const std::string& n : layout.needles) {
    needle_tokens.push_back(tokenizer.Encode(n));
    fixed += static_cast<int64_t>(needle_tokens.back().size());
  }
  const int64_t answer_tokens =
      static_cast<int64_t>(tokenizer.Encode(answer).size());
  const int64_t h = length - fixed - answer_tokens;
  if (h < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context_lengths: ", length, " tokens cannot hold the needles, ",
        "question and answer of kind '", kind, "' (needs at least ",
        fixed + answer_tokens, ")"));
  }

  // Haystack offsets: the queried needle after round(depth * H) tokens, the
  // others uniform; text order sorts by offset, the queried first on ties.
  std::vector<int64_t> offsets(static_cast<size_t>(needles));
  offsets[0] = std::llround(depth * static_cast<double>(h));
  for (int j = 1; j < needles; ++j)
    offsets[static_cast<size_t>(j)] = rng.Uniform(h + 1);
  std::vector<int> order(static_cast<size_t>(needles));
  for (int j = 0; j < needles; ++j) order[static_cast<size_t>(j)] = j;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return offsets[static_cast<size_t>(a)] < offsets[static_cast<size_t>(b)];
  });

  // Candidates, the true one at a uniform index.
  const std::vector<std::string> distractors = DrawDistractors(
      kind, corpus_format, layout, candidates - 1, rng, used_values);
  NiahSample s;
  s.kind = kind;
  s.length = length;
  s.depth = depth;
  s.index = index;
  s.answer_index = static_cast<int>(rng.Uniform(candidates));
  for (int c = 0, d = 0; c < candidates; ++c) {
    s.candidates.push_back(
        c == s.answer_index ? answer : distractors[static_cast<size_t>(d++)]);
    s.candidate_tokens.push_back(tokenizer.Encode(s.candidates.back()));
  }
  // Haystack segments between the needles, in text order.
  SentenceStream stream(tokenizer, haystack, kind == "passkey", rng);
  std::vector<std::vector<int32_t>> segments;
  std::string hay_text;
  for (int r = 0; r <= needles; ++r) {
    const int64_t begin =
        r == 0
            ? 0
            : offsets[static_cast<size_t>(order[static_cast<size_t>(r - 1)])];
    const int64_t end =
        r == needles
            ? h
            : offsets[static_cast<size_t>(order[static_cast<size_t>(r)])];
    HLAB_ASSIGN_OR_RETURN(std::vector<int32_t> segment,
                          HaystackSegment(stream, end - begin));
    hay_text += tokenizer.Decode(segment);
    segments.push_back(std::move(segment));
  }
  for (const std::string& v : layout.values) {
    if (hay_text.find(v) != std::string::npos) {
      return absl::InternalError(
          absl::StrCat("niah: the haystack contains the value ", v));
    }
  }

  s.prompt = preamble;
  for (int r = 0; r < needles; ++r) {
    const int j = order[static_cast<size_t>(r)];
    const std::vector<int32_t>& before = segments[static_cast<size_t>(r)];
    s.prompt.insert(s.prompt.end(), before.begin(), before.end());
    if (j == 0) s.queried_needle = r;
    s.needle_positions.push_back(static_cast<int64_t>(s.prompt.size()));
    const std::vector<int32_t>& n =
        needle_tokens[static_cast<size_t>(kind == "multivalue" ? r : j)];
    s.needle_lengths.push_back(static_cast<int64_t>(n.size()));
    s.prompt.insert(s.prompt.end(), n.begin(), n.end());
  }
  s.prompt.insert(s.prompt.end(), segments.back().begin(),
                  segments.back().end());
  s.prompt.insert(s.prompt.end(), question.begin(), question.end());
  s.haystack_start = static_cast<int64_t>(preamble.size());
  s.haystack_tokens = h;
  s.haystack_before = offsets[0];
  return s;
}

std::vector<int32_t> NiahSequence(const NiahSample& sample, int c) {
  std::vector<int32_t> seq = sample.prompt;
  const std::vector<int32_t>& cand =
      sample.candidate_tokens.at(static_cast<size_t>(c));
  seq.insert(seq.end(), cand.begin(), cand.end());
  return seq;
}

namespace {

// Whether the candidate with the lowest summed NLL is the true one.
absl::StatusOr<bool> LikelihoodCorrect(TokenScorer& scorer,
                                       const NiahSample& s) {
  std::vector<std::vector<int32_t>> seqs;
  for (size_t c = 0; c < s.candidates.size(); ++c) {
    seqs.push_back(NiahSequence(s, static_cast<int>(c)));
  }
  const std::vector<std::vector<float>> nll = scorer.ScoreBatch(seqs);
  if (nll.size() != seqs.size()) {
    return absl::InternalError(absl::StrCat("niah: the scorer returned ",
                                            nll.size(), " results for ",
                                            seqs.size(), " sequences"));
  }
  int best = -1;
  double best_score = 0;
  for (size_t c = 0; c < seqs.size(); ++c) {
    if (nll[c].size() + 1 != seqs[c].size()) {
      return absl::InternalError(
          absl::StrCat("niah: the scorer returned ", nll[c].size(),
                       " NLLs for a sequence of ", seqs[c].size(), " tokens"));
    }
    const size_t k = s.candidate_tokens[c].size();
    double score = 0;
    for (size_t i = nll[c].size() - k; i < nll[c].size(); ++i) {
      score += nll[c][i];
    }
    if (best < 0 || score < best_score) {
      best = static_cast<int>(c);
      best_score = score;
    }
  }
  return best == s.answer_index;
}

// Whether greedy decoding of the answer's length reproduces it exactly.
// Through Generate: ModelScorer's runs the prompt once and then one token a
// step from its cache, where NextToken on the growing prefix would run the
// whole prompt again for every token of the answer.
absl::StatusOr<bool> GreedyCorrect(TokenScorer& scorer, const NiahSample& s) {
  const std::vector<int32_t>& answer =
      s.candidate_tokens[static_cast<size_t>(s.answer_index)];
  GenerateOptions options;
  options.max_new_tokens = static_cast<int64_t>(answer.size());
  HLAB_ASSIGN_OR_RETURN(std::vector<int32_t> out,
                        scorer.Generate(s.prompt, options));
  return out == answer;
}

}  // namespace

absl::StatusOr<NiahResult> EvaluateNiah(TokenScorer& scorer,
                                        const data::Tokenizer& tokenizer,
                                        const NiahConfig& config,
                                        const NiahProgress& progress) {
  HLAB_RETURN_IF_ERROR(ValidateNiahConfig(config));
  NiahResult result;
  result.greedy = config.greedy;
  result.candidates = config.candidates;
  const int64_t total_cells =
      static_cast<int64_t>(config.kinds.size() * config.context_lengths.size() *
                           config.depths.size());
  std::map<std::string, std::pair<int64_t, int64_t>> by_kind;
  int64_t correct = 0, greedy_correct = 0;
  for (const std::string& kind : config.kinds) {
    for (int64_t length : config.context_lengths) {
      for (double depth : config.depths) {
        NiahCell cell;
        cell.kind = kind;
        cell.context_length = length;
        cell.depth = depth;
        for (int64_t i = 0; i < config.samples; ++i) {
          HLAB_ASSIGN_OR_RETURN(
              NiahSample s,
              GenerateNiahSample(tokenizer, kind, length, depth, config.seed, i,
                                 config.candidates, config.haystack));
          HLAB_ASSIGN_OR_RETURN(bool right, LikelihoodCorrect(scorer, s));
          ++cell.samples;
          cell.correct += right ? 1 : 0;
          if (config.greedy) {
            HLAB_ASSIGN_OR_RETURN(bool exact, GreedyCorrect(scorer, s));
            cell.greedy_correct += exact ? 1 : 0;
          }
        }
        cell.accuracy = static_cast<double>(cell.correct) /
                        static_cast<double>(cell.samples);
        cell.greedy_accuracy = static_cast<double>(cell.greedy_correct) /
                               static_cast<double>(cell.samples);
        by_kind[kind].first += cell.correct;
        by_kind[kind].second += cell.samples;
        correct += cell.correct;
        greedy_correct += cell.greedy_correct;
        result.samples += cell.samples;
        result.cells.push_back(cell);
        if (progress) {
          progress(static_cast<int64_t>(result.cells.size()), total_cells);
        }
      }
    }
  }
  result.accuracy =
      static_cast<double>(correct) / static_cast<double>(result.samples);
  result.greedy_accuracy =
      static_cast<double>(greedy_correct) / static_cast<double>(result.samples);
  for (const auto& [kind, counts] : by_kind) {
    result.accuracy_by_kind[kind] =
        static_cast<double>(counts.first) / static_cast<double>(counts.second);
  }
  return result;
}

std::string NiahResultToJson(const NiahResult& result) {
  nlohmann::json j;
  j["samples"] = result.samples;
  j["candidates"] = result.candidates;
  j["accuracy"] = result.accuracy;
  j["accuracy_by_kind"] = result.accuracy_by_kind;
  j["greedy"] = result.greedy;
  if (result.greedy) j["greedy_accuracy"] = result.greedy_accuracy;
  j["cells"] = nlohmann::json::array();
  for (const NiahCell& c : result.cells) {
    nlohmann::json cell = {
        {"kind", c.kind},       {"context_length", c.context_length},
        {"depth", c.depth},     {"samples", c.samples},
        {"correct", c.correct}, {"accuracy", c.accuracy}};
    if (result.greedy) {
      cell["greedy_correct"] = c.greedy_correct;
      cell["greedy_accuracy"] = c.greedy_accuracy;
    }
    j["cells"].push_back(std::move(cell));
  }
  return j.dump();
}

absl::Status ForOneContextLength(const absl::Status& status) {
  constexpr absl::string_view kMany = "context_lengths: ";
  if (!absl::StartsWith(status.message(), kMany)) return status;
  return absl::Status(
      status.code(),
      absl::StrCat("context_length: ", status.message().substr(kMany.size())));
}

}  // namespace hlab::eval
