// LoadCheckpointModel: a trained HybridLM read back from a checkpoint file
// (train/checkpoint_file.h) for evaluation: the model config from the
// checkpoint's header, the parameters from its payload (the optimizer state
// and RNG in the payload are ignored).
//
// Thread-safety: free function.
//
//   HLAB_ASSIGN_OR_RETURN(CheckpointModel m,
//                         LoadCheckpointModel(task.checkpoint, "checkpoint"));
//   ModelScorer scorer(m.model);
#ifndef HLAB_EVAL_CHECKPOINT_MODEL_H_
#define HLAB_EVAL_CHECKPOINT_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/config/model_config.h"
#include "model/hybrid_lm.h"
#include "train/checkpoint_file.h"

namespace hlab::eval {

struct CheckpointModel {
  std::string path;
  train::CheckpointMeta meta;  // step, tokens, payload_sha256, tokenizer
  model::ModelConfig config;
  model::HybridLM model{nullptr};
};

// Errors name `field` (the task field that gave the path) and the file:
//   NotFound   no such file (check the path; re-run the training task)
//   DataLoss   the file is truncated, fails its checksum, or its header or
//              payload does not describe a model (choose another checkpoint)
absl::StatusOr<CheckpointModel> LoadCheckpointModel(const std::string& path,
                                                    const std::string& field);

// True when the model may be run beyond its trained context: false when a
// layer has full-attention heads with RoPE, whose rotary positions beyond
// the trained length were never seen.
bool CanExtrapolate(const model::ModelConfig& config);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_CHECKPOINT_MODEL_H_
