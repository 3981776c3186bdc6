#include "train/training_data.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/length_filtered_corpus.h"
#include "data/shard_corpus.h"
#include "data/shard_format.h"
#include "data/synthetic_corpus.h"
#include "task/run_config.h"

namespace hlab::train {
namespace {

constexpr uint64_t kValidationSeed = 0x7E57;

// One corpus recipe: the task's defaults are the generator's, and a run
// config's corpus version is what this generator makes.
static_assert(task::kSyntheticCorpusVersion == data::kSyntheticCorpusVersion);
static_assert(task::SyntheticDataConfig{}.min_distance ==
              data::SyntheticCorpusConfig{}.min_distance);
static_assert(task::SyntheticDataConfig{}.binding_rate ==
              data::SyntheticCorpusConfig{}.binding_rate);

absl::StatusOr<data::SyntheticCorpusConfig> SyntheticConfig(
    const task::TrainTask& task, bool long_kind, data::Split split) {
  const task::SyntheticDataConfig& s = task.data.synthetic;
  data::SyntheticCorpusConfig c;
  c.seed = task.data.seed;
  c.split = split;
  c.min_distance = s.min_distance;
  c.binding_rate = long_kind ? s.binding_rate : s.short_binding_rate;
  if (long_kind) {
    c.min_length = s.long_min_tokens > 0 ? s.long_min_tokens : task.seq_len + 1;
    c.max_length = s.long_max_tokens > 0 ? s.long_max_tokens : c.min_length;
  } else {
    c.min_length = s.short_min_tokens > 0 ? s.short_min_tokens : 16;
    c.max_length = s.short_max_tokens > 0
                       ? s.short_max_tokens
                       : std::max<int64_t>(c.min_length, task.seq_len / 4);
  }
  absl::Status valid = data::ValidateSyntheticCorpusConfig(c);
  if (!valid.ok()) {
    // Name the task's field, not the corpus's.
    std::string message(valid.message());
    const std::string prefix = long_kind ? "long_" : "short_";
    if (!long_kind && message.rfind("binding_rate", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.synthetic.short_", message));
    }
    for (const char* field : {"min_length", "max_length"}) {
      if (message.rfind(field, 0) == 0) {
        const std::string bound = std::string(field).substr(0, 3);
        message = absl::StrCat("data.synthetic.", prefix, bound, "_tokens",
                               message.substr(std::string(field).size()));
        return absl::InvalidArgumentError(message);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("data.synthetic.", message));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<data::Corpus>> OpenSplit(
    const std::string& field, const std::string& dir, const char* split) {
  auto corpus = data::ShardCorpus::Open(dir, split);
  if (!corpus.ok()) {
    return absl::Status(corpus.status().code(),
                        absl::StrCat(field, ": ", corpus.status().message()));
  }
  return std::unique_ptr<data::Corpus>(*std::move(corpus));
}

// A view of `base` with the documents of [min_tokens, max_tokens) tokens.
absl::StatusOr<std::unique_ptr<data::Corpus>> ByLength(
    const data::Corpus* base, int64_t min_tokens, int64_t max_tokens,
    const std::string& field) {
  auto filtered =
      data::LengthFilteredCorpus::Create(base, min_tokens, max_tokens);
  if (!filtered.ok()) {
    return absl::Status(filtered.status().code(),
                        absl::StrCat(field, ": ", filtered.status().message()));
  }
  return std::unique_ptr<data::Corpus>(*std::move(filtered));
}

}  // namespace

absl::Status TrainingData::OpenPrepared(const task::TrainTask& task,
                                        TrainingData* d) {
  const task::DataConfig& c = task.data;
  for (const char* split : {data::kTrainSplit, data::kHeldOutSplit}) {
    const bool train = std::string(split) == data::kTrainSplit;
    std::unique_ptr<data::Corpus> long_docs, short_docs;
    if (c.long_dir == c.short_dir) {
      // One dataset for both kinds: documents of >= seq_len tokens are long.
      HLAB_ASSIGN_OR_RETURN(std::unique_ptr<data::Corpus> base,
                            OpenSplit("data.long_dir", c.long_dir, split));
      HLAB_ASSIGN_OR_RETURN(
          long_docs,
          ByLength(base.get(), task.seq_len,
                   std::numeric_limits<int64_t>::max(), "data.long_dir"));
      HLAB_ASSIGN_OR_RETURN(
          short_docs, ByLength(base.get(), 1, task.seq_len, "data.short_dir"));
      d->owned_.push_back(std::move(base));
    } else {
      if (c.long_fraction > 0) {
        HLAB_ASSIGN_OR_RETURN(long_docs,
                              OpenSplit("data.long_dir", c.long_dir, split));
      }
      if (c.long_fraction < 1) {
        HLAB_ASSIGN_OR_RETURN(short_docs,
                              OpenSplit("data.short_dir", c.short_dir, split));
      }
    }
    (train ? d->long_train_ : d->long_held_) = std::move(long_docs);
    (train ? d->short_train_ : d->short_held_) = std::move(short_docs);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TrainingData>> TrainingData::Create(
    const task::TrainTask& task) {
  std::unique_ptr<TrainingData> d(new TrainingData());
  if (task.data.source == "synthetic") {
    HLAB_ASSIGN_OR_RETURN(auto long_train,
                          SyntheticConfig(task, true, data::Split::kTrain));
    HLAB_ASSIGN_OR_RETURN(auto short_train,
                          SyntheticConfig(task, false, data::Split::kTrain));
    HLAB_ASSIGN_OR_RETURN(auto long_held,
                          SyntheticConfig(task, true, data::Split::kHeldOut));
    HLAB_ASSIGN_OR_RETURN(auto short_held,
                          SyntheticConfig(task, false, data::Split::kHeldOut));
    d->long_train_ = std::make_unique<data::SyntheticCorpus>(long_train);
    d->short_train_ = std::make_unique<data::SyntheticCorpus>(short_train);
    d->long_held_ = std::make_unique<data::SyntheticCorpus>(long_held);
    d->short_held_ = std::make_unique<data::SyntheticCorpus>(short_held);
  } else {
    HLAB_RETURN_IF_ERROR(OpenPrepared(task, d.get()));
  }
  const data::MixtureConfig train_config = {
      .seq_len = task.seq_len,
      .long_fraction = task.data.long_fraction,
      .seed = task.data.seed};
  HLAB_ASSIGN_OR_RETURN(
      data::SequenceMixture train,
      data::SequenceMixture::Create(d->long_train_.get(), d->short_train_.get(),
                                    train_config));
  data::MixtureConfig validation_config = train_config;
  validation_config.seed = task.data.seed ^ kValidationSeed;
  HLAB_ASSIGN_OR_RETURN(
      data::SequenceMixture validation,
      data::SequenceMixture::Create(d->long_held_.get(), d->short_held_.get(),
                                    validation_config));
  d->train_.emplace(train);
  d->validation_.emplace(validation);
  d->validation_config_ = validation_config;
  if (task.model.vocab_size < d->vocabulary().size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.vocab_size: ", task.model.vocab_size,
        " is smaller than the data's vocabulary (", d->vocabulary().size,
        " tokens, tokenizer '", d->vocabulary().tokenizer, "'): set it to ",
        d->vocabulary().size));
  }
  return d;
}

absl::StatusOr<data::SequenceMixture> TrainingData::ValidationWith(
    double long_fraction) const {
  data::MixtureConfig config = validation_config_;
  config.long_fraction = long_fraction;
  return data::SequenceMixture::Create(long_held_.get(), short_held_.get(),
                                       config);
}

}  // namespace hlab::train
