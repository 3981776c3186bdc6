// Serialization of the training state that a checkpoint's payload holds:
// model parameters and buffers, the AdamW state (moments and step counts per
// parameter), and the default CPU generator's state. The schedule and data
// positions are the step in the checkpoint's header: the learning rate and
// the batch of a step are pure functions of it.
//
// Not thread-safe; call between steps.
//
//   std::string payload = SaveTrainingState(*model, *optimizer);
//   HLAB_RETURN_IF_ERROR(LoadTrainingState(payload, *model, *optimizer));
#ifndef HLAB_TRAIN_TRAINING_STATE_H_
#define HLAB_TRAIN_TRAINING_STATE_H_

#include <string>

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include "absl/status/status.h"

namespace hlab::train {

std::string SaveTrainingState(torch::nn::Module& model,
                              torch::optim::AdamW& optimizer);

// Loads the state onto `device` (where the model lives). DataLoss when the
// payload does not match the model (another config) or is malformed.
absl::Status LoadTrainingState(const std::string& payload,
                               torch::nn::Module& model,
                               torch::optim::AdamW& optimizer,
                               const torch::Device& device = torch::kCPU);

}  // namespace hlab::train

#endif  // HLAB_TRAIN_TRAINING_STATE_H_
