#include "eval/longppl_reference.h"

#include <filesystem>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/mapped_file.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/internal/task_checks.h"
#include "eval/llama_scorer.h"
#include "eval/token_scorer.h"
#include "model/llama/llama_model.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;

constexpr char kHfField[] = "evals.longppl.reference.hf_dir";

absl::Status Prefixed(const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(kHfField, ": ", s.message()));
}

// The Llama's tokenizer when it is not the evaluated model's (key tokens
// then travel as character ranges), null when they tokenize alike;
// FailedPrecondition when they differ and the directory has no
// tokenizer.json to select with.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> LlamaTokenizer(
    const std::string& dir, int64_t llama_vocab,
    const model::ModelConfig& model, const std::string& model_tokenizer,
    std::vector<std::string>* warnings) {
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    if (llama_vocab != model.vocab_size) {
      return absl::FailedPreconditionError(absl::StrCat(
          kHfField, ": vocab/tokenizer differ: the Llama in ", dir,
          " has a vocabulary of ", llama_vocab, " tokens, the evaluated model ",
          model.vocab_size,
          ", and no tokenizer.json to select key tokens with: put the "
          "Llama's tokenizer.json in ",
          dir, " (key tokens then pass to the model as character ranges)"));
    }
    warnings->push_back(absl::StrCat(
        kHfField, ": ", dir,
        " has no tokenizer.json; only the vocabulary sizes were compared"));
    return std::unique_ptr<data::Tokenizer>();
  }
  auto tokenizer = data::MakeTokenizer(absl::StrCat("hf:", dir));
  if (!tokenizer.ok()) return Prefixed(tokenizer.status());
  const std::string& identity = (*tokenizer)->vocabulary().tokenizer;
  if (llama_vocab == model.vocab_size && model_tokenizer.empty()) {
    warnings->push_back(absl::StrCat(
        kHfField,
        ": the evaluated checkpoint records no tokenizer; only the "
        "vocabulary sizes were compared"));
    return std::unique_ptr<data::Tokenizer>();
  }
  if (llama_vocab == model.vocab_size && identity == model_tokenizer) {
    return std::unique_ptr<data::Tokenizer>();
  }
  return std::move(*tokenizer);
}

// A checkpoint reference's tokenizer when it is not the evaluated model's,
// as reference.tokenizer names it; null when they tokenize alike.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> CheckpointTokenizer(
    const task::LongPplReference& spec, const model::ModelConfig& model,
    const std::string& model_tokenizer, const CheckpointModel& reference,
    std::vector<std::string>* warnings) {
  const std::string field = "evals.longppl.reference.tokenizer";
  if (spec.tokenizer.empty()) {
    HLAB_RETURN_IF_ERROR(
        internal::CheckReference(model, model_tokenizer, reference.config,
                                 reference.meta.tokenizer, warnings));
    return std::unique_ptr<data::Tokenizer>();
  }
  auto tokenizer = data::MakeTokenizer(spec.tokenizer);
  if (!tokenizer.ok()) {
    return absl::Status(
        tokenizer.status().code(),
        absl::StrCat(field, ": ", tokenizer.status().message()));
  }
  const data::Vocabulary& v = (*tokenizer)->vocabulary();
  if (!reference.meta.tokenizer.empty() &&
      v.tokenizer != reference.meta.tokenizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": '", spec.tokenizer, "' is tokenizer ", v.tokenizer,
        ", but the reference was trained with ", reference.meta.tokenizer,
        ": name the reference's own tokenizer"));
  }
  if (v.size > reference.config.vocab_size) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": '", spec.tokenizer, "' has ", v.size,
                     " ids, more than the reference's vocabulary of ",
                     reference.config.vocab_size));
  }
  if (v.tokenizer == model_tokenizer &&
      reference.config.vocab_size == model.vocab_size) {
    return std::unique_ptr<data::Tokenizer>();
  }
  return std::move(*tokenizer);
}

// SHA-256 of config.json and every tensor's name, dtype, shape and bytes.
absl::StatusOr<std::string> LlamaIdentity(
    const std::string& dir, const model::llama::SafetensorsCheckpoint& w) {
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> config,
                        MappedFile::Open(dir + "/config.json"));
  Sha256 sha;
  sha.Update(config->data(), config->size());
  for (const auto& [name, t] : w.tensors()) {
    const std::string head =
        absl::StrCat(name, ":", model::llama::SafetensorsDTypeName(t->dtype),
                     ":", t->shape.size());
    sha.Update(head.data(), head.size());
    sha.Update(t->shape.data(), t->shape.size() * sizeof(int64_t));
    sha.Update(t->data, t->bytes);
  }
  return sha.HexDigest();
}

absl::StatusOr<LongPplReferenceModel> LoadLlama(
    const task::LongPplReference& spec, const model::ModelConfig& model,
    const std::string& model_tokenizer, std::vector<std::string>* warnings) {
  model::llama::LlamaLoadOptions options;
  options.dtype = spec.dtype;
  options.device = torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0)
                                               : torch::kCPU;
  auto loaded = model::llama::LlamaModel::Load(spec.hf_dir, options);
  if (!loaded.ok()) return Prefixed(loaded.status());
  std::shared_ptr<const model::llama::LlamaModel> llama = *std::move(loaded);
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        LlamaTokenizer(spec.hf_dir, llama->config().vocab_size,
                                       model, model_tokenizer, warnings));
  auto identity = LlamaIdentity(spec.hf_dir, llama->weights());
  if (!identity.ok()) return Prefixed(identity.status());
  LongPplReferenceModel out;
  out.sha256 = *identity;
  out.details = {
      {"hf_dir", spec.hf_dir},
      {"weights", llama->weights_description()},
      {"dtype", llama->dtype() == torch::kBFloat16 ? "bf16" : "fp32"},
      {"device", llama->device().str()},
      {"parameters", model::llama::LlamaParameterCount(llama->config())},
      {"sha256", out.sha256}};
  if (tokenizer != nullptr) {
    out.details["tokenizer"] = tokenizer->vocabulary().tokenizer;
  }
  out.tokenizer = std::move(tokenizer);
  out.scorer = std::make_unique<LlamaScorer>(std::move(llama));
  return out;
}

}  // namespace

absl::StatusOr<LongPplReferenceModel> LoadLongPplReference(
    const task::LongPplReference& spec, const model::ModelConfig& model,
    const std::string& model_tokenizer, std::vector<std::string>* warnings) {
  if (!spec.hf_dir.empty()) {
    return LoadLlama(spec, model, model_tokenizer, warnings);
  }
  HLAB_ASSIGN_OR_RETURN(
      CheckpointModel reference,
      LoadCheckpointModel(spec.File(), "evals.longppl.reference.checkpoint"));
  HLAB_ASSIGN_OR_RETURN(
      std::unique_ptr<data::Tokenizer> tokenizer,
      CheckpointTokenizer(spec, model, model_tokenizer, reference, warnings));
  LongPplReferenceModel out;
  out.sha256 = reference.meta.payload_sha256;
  out.details = {{"checkpoint", spec.File()},
                 {"run_id", spec.run_id},
                 {"step", reference.meta.step},
                 {"payload_sha256", reference.meta.payload_sha256}};
  if (tokenizer != nullptr) {
    out.details["tokenizer"] = tokenizer->vocabulary().tokenizer;
  }
  out.tokenizer = std::move(tokenizer);
  out.scorer = std::make_unique<ModelScorer>(reference.model);
  return out;
}

absl::StatusOr<Json> CheckLlamaReference(const task::LongPplReference& spec,
                                         const model::ModelConfig& model,
                                         const std::string& model_tokenizer,
                                         std::vector<std::string>* warnings) {
  auto config = model::llama::ReadLlamaConfig(spec.hf_dir);
  if (!config.ok()) return Prefixed(config.status());
  auto weights = model::llama::SafetensorsCheckpoint::Open(spec.hf_dir);
  if (!weights.ok()) return Prefixed(weights.status());
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        LlamaTokenizer(spec.hf_dir, config->vocab_size, model,
                                       model_tokenizer, warnings));
  Json out = {{"hf_dir", spec.hf_dir},
              {"weights", (*weights)->description()},
              {"parameters", model::llama::LlamaParameterCount(*config)}};
  if (tokenizer != nullptr) {
    out["tokenizer"] = tokenizer->vocabulary().tokenizer;
  }
  return out;
}

}  // namespace hlab::eval
