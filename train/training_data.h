// TrainingData: the corpora and mixtures a task trains and validates on,
// built from its `data` section.
//
// The training mixture draws from the training split; the validation mixture
// draws from the held-out split, which training never sees (synthetic: a
// disjoint seed domain; prepared: the held-out shards). A prepared dataset
// given as both long_dir and short_dir is split by length: documents of at
// least seq_len tokens are long, the rest short.
//
// Thread-safety: immutable after Create; safe for concurrent Sample calls.
//
//   HLAB_ASSIGN_OR_RETURN(auto data, TrainingData::Create(task));
//   HLAB_ASSIGN_OR_RETURN(auto seq, data->train().Sample(k));
#ifndef HLAB_TRAIN_TRAINING_DATA_H_
#define HLAB_TRAIN_TRAINING_DATA_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "data/mixture.h"
#include "task/train_task.h"

namespace hlab::train {

class TrainingData {
 public:
  // InvalidArgument naming the field for a bad data section; NotFound or
  // DataLoss naming the file for a missing or corrupt prepared dataset.
  static absl::StatusOr<std::unique_ptr<TrainingData>> Create(
      const task::TrainTask& task);

  const data::SequenceMixture& train() const { return *train_; }
  const data::SequenceMixture& validation() const { return *validation_; }
  const data::Vocabulary& vocabulary() const { return train_->vocabulary(); }
  // The held-out corpora behind validation() (null when the task's
  // long_fraction leaves one kind out of a prepared dataset). The
  // evaluator reads long held-out documents for LongPPL.
  const data::Corpus* long_held_out() const { return long_held_.get(); }
  const data::Corpus* short_held_out() const { return short_held_.get(); }
  // The held-out documents packed as validation() packs them (same seed),
  // with another long fraction: 0 for the short documents alone, 1 for the
  // long ones. InvalidArgument when the run has no documents of that kind.
  absl::StatusOr<data::SequenceMixture> ValidationWith(
      double long_fraction) const;

 private:
  TrainingData() = default;
  static absl::Status OpenPrepared(const task::TrainTask& task,
                                   TrainingData* d);

  std::vector<std::unique_ptr<data::Corpus>> owned_;  // bases of views
  std::unique_ptr<data::Corpus> long_train_, short_train_, long_held_,
      short_held_;
  std::optional<data::SequenceMixture> train_, validation_;
  data::MixtureConfig validation_config_;
};

}  // namespace hlab::train

#endif  // HLAB_TRAIN_TRAINING_DATA_H_
