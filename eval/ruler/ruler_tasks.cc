// RULER's synthetic tasks (eval/ruler/ruler_tasks.h).
#include "eval/ruler/ruler_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/random.h"
#include "eval/ruler/word_lists.h"

namespace hlab::eval::ruler {
namespace {

constexpr char kNoise[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. "
    "There and back again.";
constexpr int kMaxAttempts = 16;
constexpr int64_t kMaxUnits = int64_t{1} << 24;

// RULER's templates for base models: the text before the context, and the
// question with the answer prefix after it.
constexpr char kNiahHeadPlural[] =
    "Some special magic {v} are hidden within the following text. Make sure "
    "to memorize it. I will quiz you about the {v} afterwards.\n";
constexpr char kNiahTailPlural[] =
    "\nWhat are all the special magic {v} for {q} mentioned in the provided "
    "text? The special magic {v} for {q} mentioned in the provided text are";
constexpr char kNiahHeadSingular[] =
    "A special magic {v} is hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {v} afterwards.\n";
constexpr char kNiahTailSingular[] =
    "\nWhat is the special magic {v} for {q} mentioned in the provided text? "
    "The special magic {v} for {q} mentioned in the provided text is";
constexpr char kVtHead[] =
    "Memorize and track the chain(s) of variable assignment hidden in the "
    "following text.\n\n";
// RULER's own spelling ("assgined") is kept: the prompt is RULER's.
constexpr char kVtTail[] =
    "\nQuestion: Find all variables that are assigned the value {q} in the "
    "text above. Answer: According to the chain(s) of variable assignment in "
    "the text above, {n} variables are assgined the value {q}, they are: ";
constexpr char kCweHead[] =
    "Below is a numbered list of words. In these words, some appear more "
    "often than others. Memorize the ones that appear most often.\n";
constexpr char kCweTail[] =
    "\nQuestion: What are the 10 most common words in the above list? "
    "Answer: The top 10 words that appear most often in the list are:";
constexpr char kFweHead[] =
    "Read the following coded text and track the frequency of each coded "
    "word. Find the three most frequently appeared coded words. ";
constexpr char kFweTail[] =
    "\nQuestion: Do not provide any explanation. Please ignore the dots "
    "'....'. What are the three most frequently appeared words in the above "
    "coded text? Answer: According to the coded text above, the three most "
    "frequently appeared words are:";
constexpr char kQaInstruction[] =
    "Answer the question based on the given documents. Only give me the "
    "answer and do not output any other words.";

// One piece of a prompt, encoded on its own; `placement` marks a piece that
// states an answer.
struct Piece {
  std::string text;
  bool placement = false;
};

// A sample before encoding: its pieces, answers, and how often each checked
// string must occur in the prompt (case-insensitively).
struct Draft {
  std::vector<Piece> pieces;
  std::vector<std::string> answers;
  std::vector<std::pair<std::string, int64_t>> expected;
};

using Composer = std::function<absl::StatusOr<Draft>(int64_t units, uint64_t)>;

std::string Lower(absl::string_view s) { return absl::AsciiStrToLower(s); }

// Occurrences of `needle` in `text`, overlapping ones counted.
int64_t Occurrences(const std::string& text, const std::string& needle) {
  if (needle.empty()) return 0;
  int64_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Python's random.sample(range(n), k): k distinct indices in draw order.
std::vector<int64_t> SampleIndices(data::Rng& rng, int64_t n, int64_t k) {
  std::vector<int64_t> pool(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
  for (int64_t i = 0; i < k; ++i) {
    std::swap(pool[static_cast<size_t>(i)],
              pool[static_cast<size_t>(i + rng.Uniform(n - i))]);
  }
  pool.resize(static_cast<size_t>(k));
  return pool;
}

template <class T>
void Shuffle(std::vector<T>& v, data::Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1],
              v[static_cast<size_t>(rng.Uniform(static_cast<int64_t>(i)))]);
  }
}

std::string Number(data::Rng& rng) {
  return std::to_string(1000000 + rng.Uniform(9000000));
}

std::string Word(data::Rng& rng) {
  const auto& adjs = RulerAdjectives();
  const auto& nouns = RulerNouns();
  return absl::StrCat(
      adjs[static_cast<size_t>(rng.Uniform(static_cast<int64_t>(adjs.size())))],
      "-",
      nouns[static_cast<size_t>(
          rng.Uniform(static_cast<int64_t>(nouns.size())))]);
}

// A version-4 UUID, as Python's uuid.UUID(int=random bits, version=4).
std::string Uuid(data::Rng& rng) {
  uint64_t hi = rng.Next(), lo = rng.Next();
  hi = (hi & ~uint64_t{0xF000}) | 0x4000;                      // version 4
  lo = (lo & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);  // variant
  constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 15; i >= 0; --i) s.push_back(kHex[(hi >> (4 * i)) & 0xF]);
  for (int i = 15; i >= 0; --i) s.push_back(kHex[(lo >> (4 * i)) & 0xF]);
  return absl::StrCat(s.substr(0, 8), "-", s.substr(8, 4), "-", s.substr(12, 4),
                      "-", s.substr(16, 4), "-", s.substr(20));
}

// A fresh value of `type`, not in `used` (added).
std::string Fresh(const std::string& type, data::Rng& rng,
                  std::set<std::string>& used) {
  std::string v;
  do {
    v = type == "numbers" ? Number(rng)
        : type == "words" ? Word(rng)
                          : Uuid(rng);
  } while (!used.insert(v).second);
  return v;
}

std::string Fill(std::string text, const std::string& v, const std::string& q,
                 const std::string& n = "") {
  return absl::StrReplaceAll(text, {{"{v}", v}, {"{q}", q}, {"{n}", n}});
}

// RULER's sentence split of the essay (nltk's sent_tokenize, simplified):
// after '.', '!' or '?' followed by a space.
std::vector<std::string> Sentences(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if ((c == '.' || c == '!' || c == '?') && text[i + 1] == ' ') {
      out.push_back(text.substr(begin, i + 1 - begin));
      begin = i + 2;
    }
  }
  if (begin < text.size()) out.push_back(text.substr(begin));
  return out;
}

// ---- NIAH ----

absl::StatusOr<Draft> ComposeNiah(const RulerTaskInfo& t,
                                  const std::vector<std::string>& essay_words,
                                  int64_t units, uint64_t seed) {
  data::Rng rng(seed);
  std::set<std::string> used;
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
  struct Needle {
    std::string text;
    bool answer = false;
  };
  std::vector<Needle> needles;
  for (int k = 0; k < t.keys; ++k) {
    keys.push_back(Fresh(t.key_type, rng, used));
    values.emplace_back();
    for (int v = 0; v < t.values; ++v) {
      values.back().push_back(Fresh(t.value_type, rng, used));
    }
  }
  const std::vector<int64_t> asked = SampleIndices(rng, t.keys, t.queries);
  std::vector<std::string> answers, queries;
  for (int64_t k : asked) {
    queries.push_back(keys[static_cast<size_t>(k)]);
    for (const std::string& v : values[static_cast<size_t>(k)]) {
      answers.push_back(v);
    }
  }
  for (int k = 0; k < t.keys; ++k) {
    const bool is_asked =
        std::find(asked.begin(), asked.end(), k) != asked.end();
    for (const std::string& v : values[static_cast<size_t>(k)]) {
      needles.push_back(
          {absl::StrCat("One of the special magic ", t.value_type, " for ",
                        keys[static_cast<size_t>(k)], " is: ", v, "."),
           is_asked});
    }
  }
  Shuffle(needles, rng);

  Draft d;
  const bool singular = t.queries * t.values == 1;
  const std::string v =
      singular ? t.value_type.substr(0, t.value_type.size() - 1) : t.value_type;
  std::string query = queries.back();
  if (queries.size() > 1) {
    query =
        absl::StrCat(absl::StrJoin(queries.begin(), queries.end() - 1, ", "),
                     ", and ", queries.back());
  }
  d.pieces.push_back(
      {Fill(singular ? kNiahHeadSingular : kNiahHeadPlural, v, query)});
  const int64_t n_needles = static_cast<int64_t>(needles.size());
  if (t.haystack == "essay") {
    std::string text;
    for (int64_t i = 0; i < units; ++i) {
      if (i > 0) text.push_back(' ');
      text += essay_words[static_cast<size_t>(i) % essay_words.size()];
    }
    const std::vector<std::string> sents = Sentences(text);
    // RULER's 40 depths, rounded percentages of the sentence count.
    std::vector<int64_t> depths;
    for (int i = 0; i < 40; ++i) {
      depths.push_back(std::llround(100.0 * i / 39.0));
    }
    std::vector<int64_t> at;
    for (int64_t i : SampleIndices(rng, 40, n_needles)) {
      at.push_back(static_cast<int64_t>(sents.size()) *
                   depths[static_cast<size_t>(i)] / 100);
    }
    std::sort(at.begin(), at.end());
    at.insert(at.begin(), 0);
    at.push_back(static_cast<int64_t>(sents.size()));
    bool first = true;
    auto add = [&](Piece p) {
      if (!first) d.pieces.push_back({" "});
      first = false;
      d.pieces.push_back(std::move(p));
    };
    for (size_t i = 1; i < at.size(); ++i) {
      if (at[i] > at[i - 1]) {
        add({absl::StrJoin(sents.begin() + at[i - 1], sents.begin() + at[i],
                           " ")});
      }
      if (i - 1 < needles.size()) {
        add({needles[i - 1].text, needles[i - 1].answer});
      }
    }
  } else {
    if (units < n_needles) {
      return absl::OutOfRangeError("fewer haystack units than needles");
    }
    std::vector<Needle> sentences;
    for (int64_t i = 0; i < units; ++i) {
      if (t.haystack == "noise") {
        sentences.push_back({kNoise, false});
      } else {  // "needle": distractors with fresh keys and values
        const std::string key = Fresh(t.key_type, rng, used);
        const std::string value = Fresh(t.value_type, rng, used);
        sentences.push_back(
            {absl::StrCat("One of the special magic ", t.value_type, " for ",
                          key, " is: ", value, "."),
             false});
      }
    }
    std::vector<int64_t> at = SampleIndices(rng, units, n_needles);
    std::sort(at.rbegin(), at.rend());
    for (size_t i = 0; i < at.size(); ++i) {
      sentences.insert(sentences.begin() + at[i], needles[i]);
    }
    for (size_t i = 0; i < sentences.size(); ++i) {
      if (i > 0) d.pieces.push_back({"\n"});
      d.pieces.push_back({sentences[i].text, sentences[i].answer});
    }
  }
  d.pieces.push_back(
      {Fill(singular ? kNiahTailSingular : kNiahTailPlural, v, query)});
  d.answers = answers;
  for (const std::string& a : answers) d.expected.emplace_back(a, 1);
  return d;
}

// ---- Variable tracking ----

absl::StatusOr<Draft> ComposeVt(int64_t units, uint64_t seed) {
  constexpr int kHops = 4;
  data::Rng rng(seed);
  std::set<std::string> used;
  std::vector<std::string> vars;
  while (vars.size() < kHops + 1) {
    std::string v;
    for (int i = 0; i < 5; ++i) {
      v.push_back(static_cast<char>('A' + rng.Uniform(26)));
    }
    if (used.insert(v).second) vars.push_back(v);
  }
  const std::string value = std::to_string(10000 + rng.Uniform(89999));
  std::vector<Piece> chain = {
      {absl::StrCat("VAR ", vars[0], " = ", value), true}};
  for (int j = 0; j < kHops; ++j) {
    chain.push_back(
        {absl::StrCat("VAR ", vars[j + 1], " = VAR ", vars[j], " "), true});
  }
  if (units < static_cast<int64_t>(chain.size())) {
    return absl::OutOfRangeError("fewer noise units than statements");
  }
  std::vector<Piece> sentences(static_cast<size_t>(units),
                               Piece{absl::StrCat(kNoise, "\n")});
  std::vector<int64_t> at =
      SampleIndices(rng, units, static_cast<int64_t>(chain.size()));
  std::sort(at.begin(), at.end());
  for (size_t j = 0; j < chain.size(); ++j) {
    sentences.insert(sentences.begin() + at[j] + static_cast<int64_t>(j),
                     chain[j]);
  }
  Draft d;
  d.pieces.push_back({kVtHead});
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (i > 0) d.pieces.push_back({" "});
    d.pieces.push_back(sentences[i]);
  }
  d.pieces.push_back({Fill(kVtTail, "", value, std::to_string(kHops + 1))});
  d.answers = vars;
  for (size_t j = 0; j < vars.size(); ++j) {
    d.expected.emplace_back(vars[j], j + 1 < vars.size() ? 2 : 1);
  }
  d.expected.emplace_back(value, 3);  // its statement and the question
  return d;
}

// ---- Common-words extraction ----

// RULER's sample_unique_words: `n` distinct words from `base` (shuffled),
// compounding base words "a-b" (then "a-b-c" ...) once `n` exceeds it.
std::vector<std::string> UniqueWords(const std::vector<std::string>& base,
                                     int64_t n, data::Rng& rng) {
  const int64_t size = static_cast<int64_t>(base.size());
  int arity = 1;
  double capacity = static_cast<double>(size);
  while (capacity < static_cast<double>(n)) {
    ++arity;
    capacity *= static_cast<double>(size);
  }
  std::vector<std::string> out;
  if (arity == 1) {
    for (int64_t i : SampleIndices(rng, size, n)) {
      out.push_back(base[static_cast<size_t>(i)]);
    }
    return out;
  }
  std::set<std::string> seen;
  while (static_cast<int64_t>(out.size()) < n) {
    std::vector<std::string> parts;
    for (int a = 0; a < arity; ++a) {
      parts.push_back(base[static_cast<size_t>(rng.Uniform(size))]);
    }
    std::string w = absl::StrJoin(parts, "-");
    if (seen.insert(w).second) out.push_back(std::move(w));
  }
  return out;
}

void AddList(const std::vector<std::string>& words, Draft& d) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) d.pieces.push_back({" "});
    d.pieces.push_back({absl::StrCat(i + 1, ". ", words[i])});
  }
}

absl::StatusOr<Draft> ComposeCwe(int64_t length, int64_t units, uint64_t seed) {
  constexpr int64_t kCommon = 10;
  // RULER: below 4096 tokens 6 / 1 repeats and a 20-word example (3 / 1);
  // otherwise 30 / 3 and a 40-word example (10 / 3).
  const bool short_context = length < 4096;
  const int64_t freq = short_context ? 6 : 30, ufreq = short_context ? 1 : 3;
  const int64_t ex_words = short_context ? 20 : 40;
  const int64_t ex_freq = short_context ? 3 : 10,
                ex_ufreq = short_context ? 1 : 3;
  if (units <= kCommon) return absl::OutOfRangeError("too few words");
  data::Rng rng(seed);
  std::vector<std::string> base = RulerCommonWords();
  Shuffle(base, rng);
  // The example's words are drawn with the sample's, apart from them.
  std::vector<std::string> all = UniqueWords(base, units + ex_words, rng);
  auto list = [&](size_t begin, int64_t n, int64_t f, int64_t uf) {
    std::vector<std::string> words;
    for (int64_t i = 0; i < n; ++i) {
      const std::string& w = all[begin + static_cast<size_t>(i)];
      for (int64_t r = 0; r < (i < kCommon ? f : uf); ++r) words.push_back(w);
    }
    Shuffle(words, rng);
    return words;
  };
  Draft d;
  d.pieces.push_back({kCweHead});
  AddList(list(0, ex_words, ex_freq, ex_ufreq), d);
  d.pieces.push_back({absl::StrCat(kCweTail, " ")});
  std::vector<std::string> ex_answers(all.begin(), all.begin() + kCommon);
  AddList(ex_answers, d);
  d.pieces.push_back({absl::StrCat("\n", kCweHead)});
  AddList(list(static_cast<size_t>(ex_words), units, freq, ufreq), d);
  d.pieces.push_back({kCweTail});
  for (int64_t i = 0; i < kCommon; ++i) {
    const std::string& w = all[static_cast<size_t>(ex_words + i)];
    d.answers.push_back(w);
    d.expected.emplace_back(w, freq);
  }
  return d;
}

// ---- Frequent-words extraction ----

absl::StatusOr<Draft> ComposeFwe(int64_t length, int64_t units, uint64_t seed) {
  const double zeta2 = M_PI * M_PI / 6.0;  // zeta(2): alpha 2
  const int64_t vocab_size = std::max<int64_t>(length / 50, 5);
  data::Rng rng(seed);
  std::set<std::string> used;
  std::vector<std::string> vocab;
  while (static_cast<int64_t>(vocab.size()) < vocab_size) {
    std::string w;
    for (int i = 0; i < 6; ++i) {
      w.push_back(static_cast<char>('a' + rng.Uniform(26)));
    }
    if (used.insert(w).second) vocab.push_back(w);
  }
  std::sort(vocab.begin(), vocab.end());
  Shuffle(vocab, rng);
  vocab[0] = "...";  // the top rank is noise
  std::vector<int64_t> count;
  std::vector<std::string> words;
  for (int64_t k = 1; k <= vocab_size; ++k) {
    count.push_back(
        static_cast<int64_t>(static_cast<double>(units) *
                             std::pow(static_cast<double>(k), -2.0) / zeta2));
    for (int64_t r = 0; r < count.back(); ++r) {
      words.push_back(vocab[static_cast<size_t>(k - 1)]);
    }
  }
  // The answers are the ranks 2-4: each must occur, and more often than
  // rank 5.
  if (count[3] < 1 || (vocab_size > 4 && count[3] <= count[4])) {
    return absl::OutOfRangeError("too few words to rank");
  }
  Shuffle(words, rng);
  Draft d;
  d.pieces.push_back({kFweHead});
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) d.pieces.push_back({" "});
    d.pieces.push_back({words[i]});
  }
  d.pieces.push_back({kFweTail});
  for (int k = 1; k <= 3; ++k) {
    d.answers.push_back(vocab[static_cast<size_t>(k)]);
    d.expected.emplace_back(vocab[static_cast<size_t>(k)],
                            count[static_cast<size_t>(k)]);
  }
  return d;
}

// ---- QA ----

absl::StatusOr<Draft> ComposeQa(const QaDataset& qa, int64_t units,
                                uint64_t seed) {
  data::Rng rng(seed);
  const QaExample& e = qa.examples[static_cast<size_t>(
      rng.Uniform(static_cast<int64_t>(qa.examples.size())))];
  if (units < static_cast<int64_t>(e.gold.size())) {
    return absl::OutOfRangeError("fewer documents than gold ones");
  }
  std::vector<std::pair<std::string, bool>> docs;
  for (const std::string& g : e.gold) docs.emplace_back(g, true);
  std::vector<int64_t> others;
  for (size_t i = 0; i < qa.documents.size(); ++i) {
    if (std::find(e.gold.begin(), e.gold.end(), qa.documents[i]) ==
        e.gold.end()) {
      others.push_back(static_cast<int64_t>(i));
    }
  }
  const int64_t distractors = units - static_cast<int64_t>(e.gold.size());
  if (distractors > static_cast<int64_t>(others.size())) {
    return absl::OutOfRangeError("not enough documents");
  }
  for (int64_t i :
       SampleIndices(rng, static_cast<int64_t>(others.size()), distractors)) {
    docs.emplace_back(
        qa.documents[static_cast<size_t>(others[static_cast<size_t>(i)])],
        false);
  }
  Shuffle(docs, rng);
  Draft d;
  d.pieces.push_back(
      {absl::StrCat(kQaInstruction, "\n\nThe following are given documents.")});
  for (size_t i = 0; i < docs.size(); ++i) {
    d.pieces.push_back({absl::StrCat("\n\nDocument ", i + 1, ":\n")});
    d.pieces.push_back({docs[i].first, docs[i].second});
  }
  d.pieces.push_back({absl::StrCat("\n\n", kQaInstruction,
                                   "\n\nQuestion: ", e.question, " Answer:")});
  d.answers = e.answers;
  return d;
}

uint64_t SampleSeed(const std::string& task, int64_t length, uint64_t seed,
                    int64_t index, int attempt) {
  uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a of the task's name
  for (char c : task) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ULL;
  uint64_t s = data::MixSeeds(seed, 0x52554C4552ULL);  // "RULER"
  s = data::MixSeeds(s, h);
  s = data::MixSeeds(s, static_cast<uint64_t>(length));
  s = data::MixSeeds(s, static_cast<uint64_t>(index));
  return data::MixSeeds(s, static_cast<uint64_t>(attempt));
}

// Encodes pieces, remembering short ones.
class PieceEncoder {
 public:
  explicit PieceEncoder(const data::Tokenizer& tokenizer)
      : tokenizer_(tokenizer) {}
  const std::vector<int32_t>& Encode(const std::string& text) {
    auto it = cache_.find(text);
    if (it != cache_.end()) return it->second;
    if (text.size() > 256) {
      scratch_ = tokenizer_.Encode(text);
      return scratch_;
    }
    return cache_.emplace(text, tokenizer_.Encode(text)).first->second;
  }
  int64_t Count(const Draft& d) {
    int64_t n = 0;
    for (const Piece& p : d.pieces) {
      n += static_cast<int64_t>(Encode(p.text).size());
    }
    return n;
  }

 private:
  const data::Tokenizer& tokenizer_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
  std::vector<int32_t> scratch_;
};

// The last `n` tokens of RULER's noise text repeated, a line each.
std::vector<int32_t> NoiseTail(PieceEncoder& encoder, int64_t n) {
  std::vector<int32_t> out;
  const std::vector<int32_t>& unit = encoder.Encode(absl::StrCat(kNoise, "\n"));
  while (static_cast<int64_t>(out.size()) < n) {
    out.insert(out.begin(), unit.begin(), unit.end());
  }
  return std::vector<int32_t>(out.end() - n, out.end());
}

}  // namespace

const std::vector<RulerTaskInfo>& RulerTasks() {
  static const auto* tasks = new std::vector<RulerTaskInfo>{
      {"niah_single_1", "niah", 128, "all", "", "noise", "words", "numbers"},
      {"niah_single_2", "niah", 128, "all", "essay", "essay", "words",
       "numbers"},
      {"niah_single_3", "niah", 128, "all", "essay", "essay", "words", "uuids"},
      {"niah_multikey_1", "niah", 128, "all", "essay", "essay", "words",
       "numbers", 4},
      {"niah_multikey_2", "niah", 128, "all", "", "needle", "words", "numbers"},
      {"niah_multikey_3", "niah", 128, "all", "", "needle", "uuids", "uuids"},
      {"niah_multivalue", "niah", 128, "all", "essay", "essay", "words",
       "numbers", 1, 4},
      {"niah_multiquery", "niah", 128, "all", "essay", "essay", "words",
       "numbers", 4, 1, 4},
      {"vt", "vt", 30, "all", "", "", "", ""},
      {"cwe", "cwe", 120, "all", "", "", "", ""},
      {"fwe", "fwe", 50, "all", "", "", "", ""},
      {"qa_1", "qa", 32, "part", "squad", "", "", ""},
      {"qa_2", "qa", 32, "part", "hotpotqa", "", "", ""},
  };
  return *tasks;
}

absl::StatusOr<RulerTaskInfo> FindRulerTask(const std::string& name) {
  std::vector<std::string> names;
  for (const RulerTaskInfo& t : RulerTasks()) {
    if (t.name == name) return t;
    names.push_back(t.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown RULER task \"", name,
                                          "\"; the tasks are ",
                                          absl::StrJoin(names, ", ")));
}

absl::StatusOr<RulerSample> MakeRulerSample(const RulerTaskInfo& task,
                                            int64_t length, uint64_t seed,
                                            int64_t index,
                                            const data::Tokenizer& tokenizer,
                                            const RulerSources& sources,
                                            int64_t tokens_to_generate) {
  const int64_t generate =
      tokens_to_generate > 0 ? tokens_to_generate : task.tokens_to_generate;
  const int64_t budget = length - generate;
  if (budget < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(task.name, ": length ", length, " leaves no prompt after ",
                     generate, " tokens to generate"));
  }
  std::vector<std::string> essay_words;
  if (task.needs == "essay") {
    essay_words = absl::StrSplit(sources.essay, ' ', absl::SkipWhitespace());
    if (essay_words.size() < 100) {
      return absl::InvalidArgumentError(
          absl::StrCat(task.name,
                       " needs an essay haystack of at least 100 words (RULER "
                       "uses Paul Graham's essays; any long plain text will "
                       "do): give its file"));
    }
  }
  const QaDataset* qa = task.needs == "squad"      ? &*sources.squad
                        : task.needs == "hotpotqa" ? &*sources.hotpotqa
                                                   : nullptr;
  if (!task.needs.empty() && task.needs != "essay" &&
      (task.needs == "squad" ? !sources.squad : !sources.hotpotqa)) {
    return absl::InvalidArgumentError(
        absl::StrCat(task.name, " needs the ", task.needs, " file"));
  }
  if (qa != nullptr && qa->examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        task.name, ": the ", task.needs, " file has no questions"));
  }
  Composer compose = [&](int64_t units, uint64_t s) -> absl::StatusOr<Draft> {
    if (task.family == "niah") return ComposeNiah(task, essay_words, units, s);
    if (task.family == "vt") return ComposeVt(units, s);
    if (task.family == "cwe") return ComposeCwe(length, units, s);
    if (task.family == "fwe") return ComposeFwe(length, units, s);
    return ComposeQa(*qa, units, s);
  };
  const int64_t max_units =
      qa != nullptr ? static_cast<int64_t>(qa->documents.size()) : kMaxUnits;

  PieceEncoder encoder(tokenizer);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const uint64_t s = SampleSeed(task.name, length, seed, index, attempt);
    // Units -> prompt tokens, or -1 when that many cannot make a sample.
    auto tokens_for = [&](int64_t units) -> int64_t {
      absl::StatusOr<Draft> d = compose(units, s);
      return d.ok() ? encoder.Count(*d) : -1;
    };
    // The least units that make a sample, then the most that fit: RULER's
    // search, by doubling and bisection.
    int64_t lo = 1;
    while (lo <= max_units && tokens_for(lo) < 0)
      lo = lo < 64 ? lo + 1 : lo * 2;
    if (lo > max_units) {
      return absl::InvalidArgumentError(absl::StrCat(
          task.name, ": the ", task.needs, " file has too few documents"));
    }
    const int64_t least = tokens_for(lo);
    if (least > budget) {
      return absl::InvalidArgumentError(absl::StrCat(
          task.name, ": length ", length,
          " is too short; the smallest sample "
          "has ",
          least, " prompt tokens + ", generate,
          " to generate (use a length of at least ", least + generate, ")"));
    }
    int64_t hi = lo;
    while (hi < max_units) {
      const int64_t next = std::min(max_units, hi * 2);
      const int64_t n = tokens_for(next);
      if (n < 0 || n > budget) {
        break;
      }
      lo = hi = next;
    }
    int64_t top = std::min(max_units, hi * 2);
    while (lo < top) {  // lo fits; the answer lies in [lo, top]
      const int64_t mid = lo + (top - lo + 1) / 2;
      const int64_t n = tokens_for(mid);
      if (n >= 0 && n <= budget) {
        lo = mid;
      } else {
        top = mid - 1;
      }
    }
    HLAB_ASSIGN_OR_RETURN(Draft d, compose(lo, s));
    RulerSample out;
    out.task = task.name;
    out.length = length;
    out.index = index;
    out.tokens_to_generate = generate;
    out.units = lo;
    out.answers = d.answers;
    out.padding = budget - encoder.Count(d);
    out.prompt = NoiseTail(encoder, out.padding);
    out.text = tokenizer.Decode(out.prompt);
    for (const Piece& p : d.pieces) {
      const std::vector<int32_t>& ids = encoder.Encode(p.text);
      if (p.placement) {
        const int64_t begin = static_cast<int64_t>(out.prompt.size());
        out.placements.push_back(
            {begin, begin + static_cast<int64_t>(ids.size()), p.text});
      }
      out.prompt.insert(out.prompt.end(), ids.begin(), ids.end());
      out.text += p.text;
    }
    const std::string lower = Lower(out.text);
    bool ok = true;
    for (const auto& [text, count] : d.expected) {
      ok = ok && Occurrences(lower, Lower(text)) == count;
    }
    if (ok) return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      task.name, ": no sample without an accidental copy of an answer in ",
      kMaxAttempts, " draws (is the essay text full of such strings?)"));
}

}  // namespace hlab::eval::ruler
