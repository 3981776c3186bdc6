#include "eval/token_scorer.h"

#include <algorithm>
#include <exception>
#include <string>

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "eval/internal/scoring.h"

namespace hlab::eval {
namespace {

torch::Device ModelDevice(const model::HybridLM& model) {
  for (const torch::Tensor& p : model->parameters()) return p.device();
  return torch::kCPU;
}

}  // namespace

std::vector<float> ModelScorer::Score(const std::vector<int32_t>& tokens) {
  return ScoreBatch({tokens}).front();
}

std::vector<std::vector<float>> ModelScorer::ScoreBatch(
    const std::vector<std::vector<int32_t>>& sequences) {
  model_->eval();
  return internal::ScoreBatchWith(
      [this](const torch::Tensor& inputs, const torch::Tensor& targets) {
        return model_->token_nll(inputs, targets);
      },
      ModelDevice(model_), sequences);
}

absl::StatusOr<int32_t> ModelScorer::NextToken(
    const std::vector<int32_t>& prefix) {
  model_->eval();
  return internal::NextTokenWith(
      [this](const torch::Tensor& ids) { return model_->last_logits(ids); },
      ModelDevice(model_), prefix);
}

absl::StatusOr<std::vector<int32_t>> ModelScorer::Generate(
    const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  if (prompt.empty()) {
    return absl::InvalidArgumentError("Generate: the prompt is empty");
  }
  if (options.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        "Generate: max_new_tokens must be at least 1");
  }
  model_->eval();
  const torch::Device device = ModelDevice(model_);
  std::vector<int32_t> out;
  try {
    torch::InferenceMode inference;
    model::DecodeState state;
    torch::Tensor logits = model_->prefill(
        torch::tensor(prompt, torch::kInt64).unsqueeze(0).to(device), &state,
        /*last_only=*/true);  // (1, 1, V)
    while (true) {
      // argmax returns the first maximum: the lowest id on ties, as
      // NextToken.
      const auto next = static_cast<int32_t>(
          logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>());
      out.push_back(next);
      if (static_cast<int64_t>(out.size()) >= options.max_new_tokens ||
          std::find(options.stop_tokens.begin(), options.stop_tokens.end(),
                    next) != options.stop_tokens.end()) {
        break;
      }
      logits = model_->step(
          torch::full({1, 1}, next, torch::dtype(torch::kInt64).device(device)),
          &state);  // (1, 1, V)
    }
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Generate: out of memory after ", out.size(),
                     " tokens: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("Generate: ", e.what()));
  }
  return out;
}

}  // namespace hlab::eval
