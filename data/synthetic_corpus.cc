#include "data/synthetic_corpus.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/random.h"

namespace hlab::data {
namespace {

// The filler's language (v3): a Zipfian lexicon whose words each have a
// few likely successors, themselves Zipf-weighted. A model learns the
// frequent words and transitions first and the rare ones with more
// parameters and data, so the short documents' loss falls smoothly with N
// and D, as real text's does; v2's 256 uniform words with 4 successors were
// learned whole by the smallest models, leaving a flat loss (docs/data.md).
constexpr int kLexiconSize = 2048;
constexpr int kSuccessors = 8;
constexpr double kZipfExponent = 1.0;

// Index drawn from the cumulative weights `cdf` (last entry 1).
int64_t Draw(const std::vector<double>& cdf, Rng& rng) {
  const double u = rng.UniformReal();
  return std::min<int64_t>(
      std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(),
      static_cast<int64_t>(cdf.size()) - 1);
}

std::vector<double> ZipfCdf(int n, double exponent) {
  std::vector<double> cdf(static_cast<size_t>(n));
  double total = 0;
  for (int r = 0; r < n; ++r) total += std::pow(r + 1.0, -exponent);
  double run = 0;
  for (int r = 0; r < n; ++r) {
    run += std::pow(r + 1.0, -exponent) / total;
    cdf[static_cast<size_t>(r)] = run;
  }
  cdf.back() = 1.0;
  return cdf;
}
// A recall "Kv. " is 4 tokens; its value is the second.
constexpr int64_t kRecallLength = 4;

struct Pending {
  int key, value;
  int64_t binding_position;  // offset of the binding token
  int64_t due;               // emit the recall once the text reaches this
};

}  // namespace

std::string BindingSentence(int key, int value) {
  return std::string(1, static_cast<char>(BindingToken(key, value))) + ". ";
}

std::string RecallSentence(int key, int value) {
  return std::string{KeyLetter(key), ValueDigit(value), '.', ' '};
}

absl::Status ValidateSyntheticCorpusConfig(const SyntheticCorpusConfig& c) {
  if (c.min_length < 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_length: must be >= 16 tokens, got ", c.min_length));
  }
  if (c.max_length < c.min_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_length: must be >= min_length (", c.min_length,
                     "), got ", c.max_length));
  }
  if (c.min_distance < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_distance: must be >= 1, got ", c.min_distance));
  }
  if (!(c.binding_rate >= 0 && c.binding_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("binding_rate: must be in [0, 1], got ", c.binding_rate));
  }
  if (c.num_documents < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_documents: must be >= 1, got ", c.num_documents));
  }
  return absl::OkStatus();
}

SyntheticCorpus::SyntheticCorpus(const SyntheticCorpusConfig& config)
    : config_(config) {
  vocabulary_ = {.size = kByteVocabSize,
                 .end_of_document = kByteEndOfDocument,
                 .pad = kBytePad,
                 .tokenizer = "byte"};
  // The lexicon depends on the seed only, so both splits and both document
  // kinds speak the same language.
  Rng rng(MixSeeds(config.seed, 0x1E81C0));
  lexicon_.resize(kLexiconSize);
  word_cdf_ = ZipfCdf(kLexiconSize, kZipfExponent);
  successor_cdf_ = ZipfCdf(kSuccessors, kZipfExponent);
  for (Word& word : lexicon_) {
    const int64_t letters = 2 + rng.Uniform(6);
    for (int64_t i = 0; i < letters; ++i) {
      word.text.push_back(static_cast<char>('a' + rng.Uniform(26)));
    }
    for (int s = 0; s < kSuccessors; ++s) {
      word.successors.push_back(static_cast<int32_t>(Draw(word_cdf_, rng)));
    }
  }
}

uint64_t SyntheticCorpus::DocumentSeed(int64_t index) const {
  uint64_t h = MixSeeds(
      config_.seed, config_.split == Split::kTrain ? 0x7A41ULL : 0x4E1DB0E7ULL);
  h = MixSeeds(h, static_cast<uint64_t>(config_.min_length));
  h = MixSeeds(h, static_cast<uint64_t>(config_.max_length));
  return MixSeeds(h, static_cast<uint64_t>(index % config_.num_documents));
}

int64_t SyntheticCorpus::DocumentLength(int64_t index) const {
  Rng rng(DocumentSeed(index));
  return config_.min_length +
         rng.Uniform(config_.max_length - config_.min_length + 1);
}

absl::StatusOr<Document> SyntheticCorpus::GetDocument(int64_t index) const {
  if (index < 0) {
    return absl::OutOfRangeError(
        absl::StrCat("synthetic document index must be >= 0, got ", index));
  }
  Rng rng(DocumentSeed(index));
  // Same first draw as DocumentLength().
  const int64_t length =
      config_.min_length +
      rng.Uniform(config_.max_length - config_.min_length + 1);
  std::string text;
  text.reserve(static_cast<size_t>(length + 64));
  Document doc;
  std::deque<Pending> pending;  // ordered by due

  auto filler = [&]() {
    const int64_t words = 4 + rng.Uniform(7);
    int64_t w = Draw(word_cdf_, rng);
    for (int64_t i = 0; i < words; ++i) {
      if (i > 0) text.push_back(' ');
      text += lexicon_[static_cast<size_t>(w)].text;
      w = rng.UniformReal() < 0.9
              ? lexicon_[static_cast<size_t>(w)]
                    .successors[static_cast<size_t>(Draw(successor_cdf_, rng))]
              : Draw(word_cdf_, rng);
    }
    text += ". ";
  };

  bool key_open[kSyntheticKeys] = {};
  int open_keys = 0;
  while (static_cast<int64_t>(text.size()) < length) {
    const int64_t here = static_cast<int64_t>(text.size());
    if (!pending.empty() && pending.front().due <= here) {
      const Pending p = pending.front();
      pending.pop_front();
      key_open[p.key] = false;
      --open_keys;
      text += RecallSentence(p.key, p.value);
      const int64_t value_position = here + 1;
      if (value_position < length) {
        doc.recall_positions.push_back(value_position);
        doc.recall_distances.push_back(value_position - p.binding_position);
      }
      continue;
    }
    if (open_keys < kSyntheticKeys &&
        rng.UniformReal() < config_.binding_rate) {
      // Log-uniform distance in [min_distance, room left in the document],
      // so early bindings reach far and every binding can be recalled.
      const int64_t room = length - here - 2 * kRecallLength;
      const double lo = std::log(static_cast<double>(config_.min_distance));
      const double hi =
          std::log(static_cast<double>(std::max(room, config_.min_distance)));
      const int64_t distance =
          static_cast<int64_t>(std::exp(lo + (hi - lo) * rng.UniformReal()));
      // A key not open in the document (the n-th closed one).
      int64_t nth = rng.Uniform(kSyntheticKeys - open_keys);
      int key = 0;
      while (key_open[key] || nth-- > 0) ++key;
      Pending p;
      p.key = key;
      p.value = static_cast<int>(rng.Uniform(kSyntheticValues));
      p.binding_position = here;
      // The recall's value sits one token after its start.
      p.due = p.binding_position + distance - 1;
      if (p.due + kRecallLength <= length) {
        text += BindingSentence(p.key, p.value);
        key_open[p.key] = true;
        ++open_keys;
        const auto at = std::upper_bound(
            pending.begin(), pending.end(), p.due,
            [](int64_t due, const Pending& q) { return due < q.due; });
        pending.insert(at, p);
        continue;
      }
    }
    filler();
  }
  text.resize(static_cast<size_t>(length));
  doc.tokens.assign(text.begin(), text.end());
  for (int32_t& t : doc.tokens) t &= 0xFF;
  return doc;
}

}  // namespace hlab::data
