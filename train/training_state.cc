#include "train/training_state.h"

#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "absl/strings/str_cat.h"

namespace hlab::train {

std::string SaveTrainingState(torch::nn::Module& model,
                              torch::optim::AdamW& optimizer) {
  torch::serialize::OutputArchive root, model_archive, optimizer_archive;
  model.save(model_archive);
  optimizer.save(optimizer_archive);
  root.write("model", model_archive);
  root.write("optimizer", optimizer_archive);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    root.write("cpu_rng", generator.get_state());
  }
  std::ostringstream out;
  root.save_to(out);
  return out.str();
}

absl::Status LoadTrainingState(const std::string& payload,
                               torch::nn::Module& model,
                               torch::optim::AdamW& optimizer,
                               const torch::Device& device) {
  try {
    std::istringstream in(payload);
    torch::serialize::InputArchive root, model_archive, optimizer_archive;
    root.load_from(in, device);
    root.read("model", model_archive);
    root.read("optimizer", optimizer_archive);
    model.load(model_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor rng;
    root.read("cpu_rng", rng);
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(rng.cpu());
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint payload does not match this model: ",
                     e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

}  // namespace hlab::train
