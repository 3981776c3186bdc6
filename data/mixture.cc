#include "data/mixture.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/random.h"

namespace hlab::data {

absl::Status ValidateMixtureConfig(const MixtureConfig& config) {
  if (config.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len: must be >= 1, got ", config.seq_len));
  }
  if (!(config.long_fraction >= 0 && config.long_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "long_fraction: must be in [0, 1], got ", config.long_fraction));
  }
  return absl::OkStatus();
}

absl::StatusOr<SequenceMixture> SequenceMixture::Create(
    const Corpus* long_docs, const Corpus* short_docs,
    const MixtureConfig& config) {
  HLAB_RETURN_IF_ERROR(ValidateMixtureConfig(config));
  if (config.long_fraction > 0 &&
      (long_docs == nullptr || long_docs->num_documents() == 0)) {
    return absl::InvalidArgumentError(
        "long_fraction > 0 but there are no long documents: give a long "
        "corpus or set long_fraction to 0");
  }
  if (config.long_fraction < 1 &&
      (short_docs == nullptr || short_docs->num_documents() == 0)) {
    return absl::InvalidArgumentError(
        "long_fraction < 1 but there are no short documents: give a short "
        "corpus or set long_fraction to 1");
  }
  if (long_docs != nullptr && short_docs != nullptr) {
    const Vocabulary& a = long_docs->vocabulary();
    const Vocabulary& b = short_docs->vocabulary();
    if (a.tokenizer != b.tokenizer || a.size != b.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the long and short corpora use different tokenizers ('", a.tokenizer,
          "' vs '", b.tokenizer, "'): prepare both with the same --tokenizer"));
    }
  }
  return SequenceMixture(long_docs, short_docs, config);
}

const Vocabulary& SequenceMixture::vocabulary() const {
  return (long_ != nullptr ? long_ : short_)->vocabulary();
}

absl::StatusOr<PackedSequence> SequenceMixture::Sample(int64_t index) const {
  Rng rng(
      MixSeeds(MixSeeds(config_.seed, 0x5E9u), static_cast<uint64_t>(index)));
  PackedSequence out;
  out.long_kind = rng.UniformReal() < config_.long_fraction;
  const Corpus* corpus = out.long_kind ? long_ : short_;
  const int64_t want = config_.seq_len + 1;
  const int32_t separator = corpus->vocabulary().end_of_document;
  out.tokens.reserve(static_cast<size_t>(want));
  while (static_cast<int64_t>(out.tokens.size()) < want) {
    const int64_t doc_index = rng.Uniform(corpus->num_documents());
    HLAB_ASSIGN_OR_RETURN(Document doc, corpus->GetDocument(doc_index));
    out.tokens.push_back(separator);
    const int64_t offset = static_cast<int64_t>(out.tokens.size());
    const int64_t take = std::min<int64_t>(
        static_cast<int64_t>(doc.tokens.size()), want - offset);
    out.tokens.insert(out.tokens.end(), doc.tokens.begin(),
                      doc.tokens.begin() + take);
    for (size_t i = 0; i < doc.recall_positions.size(); ++i) {
      const int64_t position = doc.recall_positions[i];
      if (position >= take) continue;
      // Token at sequence offset (offset + position) is predicted by
      // target index (offset + position - 1).
      out.recall_targets.push_back(offset + position - 1);
      out.recall_distances.push_back(doc.recall_distances[i]);
    }
  }
  return out;
}

}  // namespace hlab::data
