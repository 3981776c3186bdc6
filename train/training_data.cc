#include "train/training_data.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/synthetic_corpus.h"

namespace hlab::train {
namespace {

constexpr uint64_t kValidationSeed = 0x7E57;

absl::StatusOr<data::SyntheticCorpusConfig> SyntheticConfig(
    const TrainTask& task, bool long_kind, data::Split split) {
  const SyntheticDataConfig& s = task.data.synthetic;
  data::SyntheticCorpusConfig c;
  c.seed = task.data.seed;
  c.split = split;
  c.min_distance = s.min_distance;
  c.binding_rate = s.binding_rate;
  if (long_kind) {
    c.min_length = s.long_min_tokens > 0 ? s.long_min_tokens : task.seq_len + 1;
    c.max_length = s.long_max_tokens > 0
                       ? s.long_max_tokens
                       : std::max(c.min_length, 2 * task.seq_len);
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

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingData>> TrainingData::Create(
    const TrainTask& task) {
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
    return absl::UnimplementedError(
        "data.source \"prepared\" is not wired into the trainer yet: use "
        "\"synthetic\"");
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
  if (task.model.vocab_size < d->vocabulary().size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.vocab_size: ", task.model.vocab_size,
        " is smaller than the data's vocabulary (", d->vocabulary().size,
        " tokens, tokenizer '", d->vocabulary().tokenizer, "'): set it to ",
        d->vocabulary().size));
  }
  return d;
}

}  // namespace hlab::train
