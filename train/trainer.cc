#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#include <ATen/autocast_mode.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/autocast.h"
#include "model/config/param_count.h"
#include "model/hybrid_lm.h"
#include "task/lr_schedule.h"
#include "train/checkpoint_file.h"
#include "train/devices.h"
#include "train/exit_codes.h"
#include "train/internal/cuda_backend.h"
#include "train/libtorch_status.h"
#include "train/optimizer.h"
#include "train/training_data.h"
#include "train/training_state.h"

namespace hlab::train {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kNonFiniteMarker[] = "nonfinite-step";

// Hash of everything that shapes the trajectory up to a step; see
// CheckpointMeta::fingerprint.
std::string Fingerprint(const task::TrainTask& t) {
  Json j = Json::parse(task::TrainTaskToJson(t));
  Json f = {{"model", j["model"]},
            {"data", j["data"]},
            {"seq_len", t.seq_len},
            {"batch_tokens", t.batch_tokens},
            {"micro_batch_tokens", t.micro_batch_tokens},
            {"optimizer", j["optimizer"]},
            {"warmup_steps", t.schedule.warmup_steps},
            {"seed", t.seed},
            {"bf16", t.bf16}};
  // CUDA kernels round differently: its checkpoints are not the CPU's (CPU
  // fingerprints stay as they were).
  if (t.device != "cpu") f["device"] = t.device;
  return Sha256Hex(f.dump()).substr(0, 16);
}

// (B, T + 1) int64 tokens of sequences [first, first + count).
absl::StatusOr<torch::Tensor> MakeBatch(
    const data::SequenceMixture& mixture, int64_t first, int64_t count,
    std::vector<data::PackedSequence>* keep) {
  const int64_t width = mixture.config().seq_len + 1;
  torch::Tensor out = torch::empty({count, width}, torch::kInt64);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t b = 0; b < count; ++b) {
    HLAB_ASSIGN_OR_RETURN(data::PackedSequence s, mixture.Sample(first + b));
    std::copy(s.tokens.begin(), s.tokens.end(), p + b * width);
    if (keep != nullptr) keep->push_back(std::move(s));
  }
  return out;
}

// bf16 autocast of the forward pass on `device` (CPU or CUDA) on or off.
void SetBf16Autocast(const torch::Device& device, bool on) {
  model::SetAutocast(device.type(), on, torch::kBFloat16);
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  if (IsStorageRefusal(status)) return kExitStorage;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
      return kExitPermanent;
    case absl::StatusCode::kAborted:
      return kExitDiverged;
    default:
      return kExitRetryable;
  }
}

struct Trainer::State {
  task::TrainTask task;
  task::TrainPlan plan;
  RecordWriter* records = nullptr;
  std::unique_ptr<TrainingData> data;
  model::ModelConfig config;
  model::HybridLM model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<task::WsdSchedule> schedule;
  std::unique_ptr<DataParallel> parallel;  // null for one process
  int rank = 0;
  torch::Device device{torch::kCPU};  // the model's and the batches'
  std::string fingerprint;
  std::string model_json;
  int64_t start_step = 0;
  std::vector<double> losses;
  TrainingTime time;

  void Emit(const Json& record) {
    if (records != nullptr) records->Emit(record);
  }
  absl::Status SaveCheckpoint(int64_t step, const std::string& kind,
                              int64_t branch_budget);
  absl::Status LoadFrom(const CheckpointFile& file);
  absl::Status OnNonFinite(int64_t step, double loss, double grad_norm);
  // For a resumed trunk: the branch checkpoints at or before start_step.
  absl::Status ReportEarlierBranches();
  // Zeroes the gradients and accumulates those of step `step`'s micro
  // batches (this rank's share, summed over the ranks); returns the step's
  // mean loss.
  absl::StatusOr<double> AccumulateGradients(int64_t step);
  // The full-attention q_proj gradient norms of step `step` (before
  // clipping) as an "analysis" record, when the task asks for them.
  void EmitQGradNorms(int64_t step);
};

Trainer::Trainer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Trainer::~Trainer() = default;

int64_t Trainer::start_step() const { return state_->start_step; }
const task::TrainPlan& Trainer::plan() const { return state_->plan; }
const std::vector<double>& Trainer::losses() const { return state_->losses; }
const TrainingTime& Trainer::time() const { return state_->time; }

std::vector<float> Trainer::ParameterValues() const {
  std::vector<float> values;
  for (const torch::Tensor& p : state_->model->parameters()) {
    torch::Tensor flat =
        p.detach().to(torch::kFloat32).cpu().contiguous().view(-1);
    values.insert(values.end(), flat.data_ptr<float>(),
                  flat.data_ptr<float>() + flat.numel());
  }
  return values;
}

absl::Status Trainer::State::LoadFrom(const CheckpointFile& file) {
  if (file.meta.model_config != model_json) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint '", file.path,
                     "' was written for a different model config: use a fresh "
                     "checkpoint.dir, or the task that wrote it"));
  }
  if (file.meta.fingerprint != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", file.path,
        "' was written by a task with different data, batch, optimizer, "
        "warmup or seed settings (fingerprint ",
        file.meta.fingerprint, " vs ", fingerprint,
        "): use a fresh checkpoint.dir, or the task that wrote it"));
  }
  if (file.meta.step > plan.stop_step) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint '", file.path, "' is at step ", file.meta.step,
                     ", beyond this task's stop step ", plan.stop_step));
  }
  HLAB_RETURN_IF_ERROR(
      LoadTrainingState(file.payload, *model, *optimizer, device));
  start_step = file.meta.step;
  return absl::OkStatus();
}

absl::Status Trainer::State::SaveCheckpoint(int64_t step,
                                            const std::string& kind,
                                            int64_t branch_budget) {
  CheckpointMeta meta;
  meta.step = step;
  meta.tokens = step * task.batch_tokens;
  meta.kind = kind;
  meta.branch_budget_tokens = branch_budget;
  meta.model_config = model_json;
  meta.fingerprint = fingerprint;
  meta.tokenizer = data->vocabulary().tokenizer;
  const std::string payload = SaveTrainingState(*model, *optimizer);
  const std::string name = kind == "branch" ? BranchName(branch_budget)
                           : kind == "kept" ? KeptName(step)
                                            : LatestName(step);
  const std::string path =
      (std::filesystem::path(task.checkpoint.dir) / name).string();
  HLAB_ASSIGN_OR_RETURN(const std::string sha256,
                        WriteCheckpoint(path, meta, payload));
  if (kind == "latest") {
    HLAB_RETURN_IF_ERROR(
        PruneCheckpoints(task.checkpoint.dir, task.checkpoint.keep_last));
  }
  Json record = {{"type", "checkpoint"},  {"step", step},
                 {"tokens", meta.tokens}, {"kind", kind},
                 {"path", path},          {"sha256", sha256}};
  if (kind == "branch") record["branch_budget_tokens"] = branch_budget;
  Emit(record);
  return absl::OkStatus();
}

// The attempt that wrote a branch checkpoint may have died before its
// worker reported it, and a decay waits for each report: a resumed trunk
// says each earlier one again (the report is idempotent). One exactly at
// the step it resumes at may not have been written yet (the latest
// checkpoint of that step comes first): the state just loaded is that
// step's, so it is written now. One missing from before is a warning: its
// decay then fails, naming it.
absl::Status Trainer::State::ReportEarlierBranches() {
  for (size_t b = 0; b < plan.branch_steps.size(); ++b) {
    const int64_t step = plan.branch_steps[b];
    if (step > start_step || start_step == 0) continue;
    const std::string path = (std::filesystem::path(task.checkpoint.dir) /
                              BranchName(plan.branch_budgets[b]))
                                 .string();
    absl::StatusOr<CheckpointMeta> meta = ReadCheckpointMeta(path);
    if (!meta.ok() && step == start_step) {
      HLAB_RETURN_IF_ERROR(
          SaveCheckpoint(step, "branch", plan.branch_budgets[b]));
      continue;
    }
    if (!meta.ok()) {
      const std::string what = absl::StrCat(
          "branch checkpoint of budget ", plan.branch_budgets[b], " (step ",
          step, ") is missing or unreadable: ", meta.status().message());
      Emit({{"type", "warning"}, {"message", what}});
      std::fprintf(stderr, "hlab-train: warning: %s\n", what.c_str());
      continue;
    }
    Emit({{"type", "checkpoint"},
          {"step", meta->step},
          {"tokens", meta->tokens},
          {"kind", "branch"},
          {"path", path},
          {"sha256", meta->payload_sha256},
          {"branch_budget_tokens", meta->branch_budget_tokens}});
  }
  return absl::OkStatus();
}

absl::Status Trainer::State::OnNonFinite(int64_t step, double loss,
                                         double grad_norm) {
  const std::string what =
      absl::StrCat("loss (", loss, ") or gradient norm (", grad_norm,
                   ") is not finite at step ", step + 1);
  if (rank != 0) return absl::UnavailableError(what);  // rank 0 decides
  if (task.checkpoint.dir.empty()) {
    return absl::AbortedError(absl::StrCat(
        what,
        "; without a checkpoint.dir a retry would repeat it: lower "
        "optimizer.peak_lr"));
  }
  const std::string marker =
      (std::filesystem::path(task.checkpoint.dir) / kNonFiniteMarker).string();
  int64_t previous = -1;
  if (std::ifstream in(marker); in) in >> previous;
  if (previous == step + 1) {
    return absl::AbortedError(
        absl::StrCat(what,
                     " for the second time: the run diverges; lower "
                     "optimizer.peak_lr"));
  }
  std::error_code ec;
  std::filesystem::create_directories(task.checkpoint.dir, ec);
  std::ofstream(marker) << step + 1 << "\n";
  return absl::UnavailableError(absl::StrCat(
      what, "; the last good checkpoint is kept and a retry resumes from it"));
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const task::TrainTask& task_in, RecordWriter* records,
    const DistributedConfig& distributed) {
  auto s = std::make_unique<State>();
  s->task = task_in;
  s->rank = distributed.rank;
  s->records = distributed.rank == 0 ? records : nullptr;
  task::TrainTask& task = s->task;
  HLAB_RETURN_IF_ERROR(task::ValidateTrainTask(task));
  HLAB_RETURN_IF_ERROR(ValidateDistributedConfig(distributed));
  if (task.device == "cuda") {
    HLAB_RETURN_IF_ERROR(internal::CheckCudaTraining());
    s->device = internal::CudaDeviceForRank(distributed.rank);
  }
  at::set_num_threads(
      task.threads > 0
          ? static_cast<int>(task.threads)
          : DefaultIntraOpThreads(task.device == "cuda",
                                  std::thread::hardware_concurrency()));
  s->config = task.model;
  if (task.match_params) {
    HLAB_ASSIGN_OR_RETURN(auto matched, model::MatchParameters(s->config));
    s->config = matched.config;
    task.model = s->config;
    task.match_params = false;
  }
  const auto count = model::CountParameters(s->config);
  HLAB_ASSIGN_OR_RETURN(s->plan, task::PlanTraining(task, count.non_embedding));
  if (s->plan.micro_batches % distributed.world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batch_tokens: a step has ", s->plan.micro_batches,
        " micro-batches, which world size ", distributed.world_size,
        " does not divide: set micro_batch_tokens to batch_tokens / ",
        distributed.world_size, " or a divisor of it"));
  }
  HLAB_ASSIGN_OR_RETURN(s->data, TrainingData::Create(task));
  s->model_json = model::ModelConfigToJson(s->config);
  s->fingerprint = Fingerprint(task);

  torch::manual_seed(task.seed);
  s->model = model::HybridLM(s->config);  // initialised on the CPU
  s->model->to(s->device);
  s->optimizer =
      MakeAdamW(*s->model, {.lr = task.optimizer.peak_lr,
                            .beta1 = task.optimizer.beta1,
                            .beta2 = task.optimizer.beta2,
                            .eps = task.optimizer.eps,
                            .weight_decay = task.optimizer.weight_decay});
  s->schedule = std::make_unique<task::WsdSchedule>(s->plan.schedule);
  if (distributed.world_size > 1) {
    DistributedConfig config = distributed;
    config.cuda = s->device.is_cuda();  // NCCL instead of Gloo
    HLAB_ASSIGN_OR_RETURN(s->parallel, DataParallel::Connect(config));
  }

  if (!task.init_from.empty()) {
    auto file = ReadCheckpoint(task.init_from);
    if (!file.ok()) {
      return absl::Status(file.status().code(),
                          absl::StrCat("init_from: ", file.status().message(),
                                       ": re-run the task that wrote it"));
    }
    HLAB_RETURN_IF_ERROR(s->LoadFrom(*file));
  }
  if (task.resume && !task.checkpoint.dir.empty()) {
    std::vector<std::string> warnings;
    auto newest = NewestValidCheckpoint(task.checkpoint.dir, &warnings,
                                        task.checkpoint.resume_max_step);
    for (const std::string& w : warnings) {
      s->Emit({{"type", "warning"}, {"message", w}});
      std::fprintf(stderr, "hlab-train: warning: %s\n", w.c_str());
    }
    if (newest && newest->meta.step > s->start_step) {
      HLAB_RETURN_IF_ERROR(s->LoadFrom(*newest));
    } else if (newest && newest->meta.model_config != s->model_json) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint '", newest->path,
          "' was written for a different model config: use a fresh "
          "checkpoint.dir, or the task that wrote it"));
    }
  }
  s->Emit({{"type", "start"},
           {"name", task.name},
           {"arch", s->config.arch},
           {"non_embedding_params", count.non_embedding},
           {"total_params", count.total},
           {"budget_tokens", s->plan.budget_tokens},
           {"total_steps", s->plan.total_steps},
           {"stop_step", s->plan.stop_step},
           {"start_step", s->start_step},
           {"batch_tokens", task.batch_tokens},
           {"micro_batches", s->plan.micro_batches},
           {"threads", at::get_num_threads()},
           {"device", s->device.str()},
           {"world_size", distributed.world_size},
           {"fingerprint", s->fingerprint}});
  return std::unique_ptr<Trainer>(new Trainer(std::move(s)));
}

ValidationResult Trainer::Validate() {
  State& s = *state_;
  ValidationResult result;
  torch::NoGradGuard no_grad;
  s.model->eval();
  const int64_t per_batch = s.plan.sequences_per_micro_batch;
  const int64_t seq_len = s.task.seq_len;
  double sum = 0, recall_sum = 0;
  for (int64_t first = 0; first < s.task.eval.sequences; first += per_batch) {
    const int64_t count = std::min(per_batch, s.task.eval.sequences - first);
    std::vector<data::PackedSequence> sequences;
    auto batch = MakeBatch(s.data->validation(), first, count, &sequences);
    if (!batch.ok()) break;
    *batch = batch->to(s.device);
    torch::Tensor nll = s.model
                            ->token_nll(batch->narrow(1, 0, seq_len),
                                        batch->narrow(1, 1, seq_len))
                            .cpu();  // (B, T)
    sum += nll.sum().item<double>();
    result.tokens += nll.numel();
    auto acc = nll.accessor<float, 2>();
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t t : sequences[static_cast<size_t>(b)].recall_targets) {
        recall_sum += acc[b][t];
        ++result.recall_tokens;
      }
    }
    result.sequences += count;
  }
  s.model->train();
  result.loss =
      result.tokens > 0 ? sum / static_cast<double>(result.tokens) : 0;
  result.recall_loss =
      result.recall_tokens > 0
          ? recall_sum / static_cast<double>(result.recall_tokens)
          : 0;
  return result;
}

absl::StatusOr<double> Trainer::State::AccumulateGradients(int64_t step) {
  const int64_t seq_len = task.seq_len;
  const int64_t world = parallel ? parallel->world_size() : 1;
  const int64_t my_micro_batches = plan.micro_batches / world;
  ClearGradients(*optimizer);
  double loss_sum = 0;
  for (int64_t m = rank * my_micro_batches; m < (rank + 1) * my_micro_batches;
       ++m) {
    const int64_t first =
        step * plan.sequences_per_step + m * plan.sequences_per_micro_batch;
    const auto data_start = Clock::now();
    HLAB_ASSIGN_OR_RETURN(torch::Tensor batch,
                          MakeBatch(data->train(), first,
                                    plan.sequences_per_micro_batch, nullptr));
    time.data_seconds +=
        std::chrono::duration<double>(Clock::now() - data_start).count();
    batch = batch.to(device);
    SetBf16Autocast(device, task.bf16);
    torch::Tensor loss =
        model->loss(batch.narrow(1, 0, seq_len), batch.narrow(1, 1, seq_len));
    SetBf16Autocast(device, false);
    at::autocast::clear_cache();
    (loss / static_cast<double>(plan.micro_batches)).backward();
    loss_sum += loss.item<double>();
  }
  if (parallel) {
    parallel->SumGradients(model->parameters());
    loss_sum = parallel->Sum({loss_sum})[0];
  }
  return loss_sum / static_cast<double>(plan.micro_batches);
}

void Trainer::State::EmitQGradNorms(int64_t step) {
  const int64_t every = task.analysis.q_grad_every_steps;
  if (every <= 0 || records == nullptr || (step + 1) % every != 0) return;
  nlohmann::json norms = nlohmann::json::object();
  for (const auto& h : model->full_attention_q_grad_norms()) {
    norms[absl::StrCat("l", h.layer, "h", h.head)] = h.norm;
  }
  Emit({{"type", "analysis"},
        {"step", step + 1},
        {"tokens", (step + 1) * task.batch_tokens},
        {"q_grad_norm", norms}});
}

absl::Status Trainer::Run(const std::atomic<bool>* stop) {
  State& s = *state_;
  const task::TrainPlan& plan = s.plan;
  // Only rank 0 writes checkpoints and validates.
  const bool checkpoints = !s.task.checkpoint.dir.empty() && s.rank == 0;
  auto validate = [&](int64_t step) {
    if (s.task.eval.sequences == 0 || s.rank != 0) return;
    const ValidationResult v = Validate();
    s.Emit({{"type", "eval"},
            {"step", step},
            {"tokens", step * s.task.batch_tokens},
            {"val_loss", v.loss},
            {"val_recall_loss", v.recall_loss},
            {"sequences", v.sequences},
            {"eval_tokens", v.tokens},
            {"recall_tokens", v.recall_tokens}});
  };
  if (checkpoints) HLAB_RETURN_IF_ERROR(s.ReportEarlierBranches());
  const auto start = Clock::now();
  int64_t tokens_this_run = 0;
  double last_loss = 0;
  try {
    for (int64_t step = s.start_step; step < plan.stop_step; ++step) {
      bool stopping = stop != nullptr && stop->load();
      if (s.parallel) stopping = s.parallel->Sum({stopping ? 1.0 : 0.0})[0] > 0;
      if (stopping) {
        if (checkpoints && step > s.start_step) {
          HLAB_RETURN_IF_ERROR(s.SaveCheckpoint(step, "latest", 0));
        }
        if (s.records != nullptr) s.records->FinishProgress();
        return absl::CancelledError(absl::StrCat(
            "stopped by signal at step ", step,
            checkpoints ? "; checkpoint written, a retry resumes from it"
                        : ""));
      }
      HLAB_ASSIGN_OR_RETURN(const double loss, s.AccumulateGradients(step));
      s.EmitQGradNorms(step);
      const double grad_norm =
          ClipGradNorm(*s.model, s.task.optimizer.grad_clip);
      if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
        if (s.records != nullptr) s.records->FinishProgress();
        return s.OnNonFinite(step, loss, grad_norm);
      }
      const double lr = s.schedule->LearningRate(step);
      SetLearningRate(*s.optimizer, lr);
      s.optimizer->step();
      s.losses.push_back(loss);
      ++s.time.steps;
      s.time.total_seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      last_loss = loss;
      const int64_t done = step + 1;
      tokens_this_run += s.task.batch_tokens;
      const double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      const double tps = seconds > 0 ? tokens_this_run / seconds : 0;
      if (done % s.task.log_every_steps == 0 || done == plan.stop_step) {
        s.Emit({{"type", "step"},
                {"step", done},
                {"tokens", done * s.task.batch_tokens},
                {"loss", loss},
                {"lr", lr},
                {"grad_norm", grad_norm},
                {"tokens_per_s", tps}});
      }
      if (s.records != nullptr) {
        s.records->Progress(done, plan.stop_step, done * s.task.batch_tokens,
                            loss, tps);
      }
      // Validation comes before the step's checkpoints: the worker
      // reports a step's points before a checkpoint of that step, so once
      // the coordinator holds a checkpoint it holds every point up to it,
      // and a retry that resumes there loses none (it never validates the
      // step it resumes at).
      const bool branch_step =
          s.rank == 0 &&
          std::find(plan.branch_steps.begin(), plan.branch_steps.end(), done) !=
              plan.branch_steps.end();
      if (branch_step ||
          (s.task.eval.every_steps > 0 && done % s.task.eval.every_steps == 0 &&
           done != plan.stop_step)) {
        validate(done);
      }
      for (size_t b = 0; branch_step && b < plan.branch_steps.size(); ++b) {
        if (plan.branch_steps[b] != done) continue;
        HLAB_RETURN_IF_ERROR(
            s.SaveCheckpoint(done, "branch", plan.branch_budgets[b]));
      }
      // A kept checkpoint (evaluation.trajectory's) also serves as the
      // step's periodic one: a resume reads either.
      const int64_t keep = s.task.checkpoint.keep_every_steps;
      const bool kept =
          checkpoints && keep > 0 && done % keep == 0 && done != plan.stop_step;
      if (kept) HLAB_RETURN_IF_ERROR(s.SaveCheckpoint(done, "kept", 0));
      if (checkpoints && !kept && s.task.checkpoint.every_steps > 0 &&
          done % s.task.checkpoint.every_steps == 0 && done != plan.stop_step) {
        HLAB_RETURN_IF_ERROR(s.SaveCheckpoint(done, "latest", 0));
      }
    }
    if (checkpoints && plan.stop_step > s.start_step) {
      HLAB_RETURN_IF_ERROR(s.SaveCheckpoint(plan.stop_step, "latest", 0));
    }
    if (s.records != nullptr) s.records->FinishProgress();
    if (plan.branch_steps.empty() ||
        plan.branch_steps.back() != plan.stop_step) {
      validate(plan.stop_step);
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory during training");
  } catch (const c10::Error& e) {
    return LibTorchStatus(e);
  }
  if (checkpoints) {
    std::error_code ec;
    std::filesystem::remove(
        std::filesystem::path(s.task.checkpoint.dir) / kNonFiniteMarker, ec);
  }
  s.Emit({{"type", "done"},
          {"step", plan.stop_step},
          {"tokens", plan.stop_step * s.task.batch_tokens},
          {"loss", last_loss},
          {"data_seconds", s.time.data_seconds},
          {"seconds",
           std::chrono::duration<double>(Clock::now() - start).count()}});
  return absl::OkStatus();
}

}  // namespace hlab::train
