#include "eval/checkpoint_model.h"

#include <sstream>

#include <torch/serialize/input-archive.h>

#include "absl/strings/str_cat.h"

namespace hlab::eval {

absl::StatusOr<CheckpointModel> LoadCheckpointModel(const std::string& path,
                                                    const std::string& field) {
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": is required (the path of a checkpoint file, *.ckpt)"));
  }
  auto file = train::ReadCheckpoint(path);
  if (!file.ok()) {
    const bool missing = file.status().code() == absl::StatusCode::kNotFound;
    return absl::Status(
        file.status().code(),
        absl::StrCat(field, ": ", file.status().message(),
                     missing ? ": check the path, or re-run the training task "
                               "that writes it"
                             : ": the file is corrupt; re-run the training "
                               "task or choose another checkpoint"));
  }
  CheckpointModel out;
  out.path = path;
  out.meta = file->meta;
  auto config = model::ModelConfigFromJson(file->meta.model_config);
  if (!config.ok()) {
    return absl::DataLossError(absl::StrCat(
        field, ": checkpoint '", path, "' holds an invalid model config (",
        config.status().message(), "): choose another checkpoint"));
  }
  out.config = *std::move(config);
  try {
    out.model = model::HybridLM(out.config);
    std::istringstream in(file->payload);
    torch::serialize::InputArchive root, model_archive;
    // Onto the CPU whatever device the trainer saved from: a checkpoint of
    // a CUDA run names cuda:0, which on a CPU-only build (or beside a
    // training rank on that GPU) would fail or land on the wrong device.
    root.load_from(in, torch::Device(torch::kCPU));
    root.read("model", model_archive);
    out.model->load(model_archive);
    out.model->eval();
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat(
        field, ": checkpoint '", path,
        "' has a payload that does not match its model config: ",
        e.what_without_backtrace(), ": choose another checkpoint"));
  }
  return out;
}

bool CanExtrapolate(const model::ModelConfig& config) {
  for (const model::MixerSpec& layer : config.layers) {
    if (model::IsFullAttention(layer.kind) && !layer.nope) return false;
  }
  return true;
}

}  // namespace hlab::eval
