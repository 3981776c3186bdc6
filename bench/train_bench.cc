// hlab-bench-train: end-to-end training throughput, data loading included,
// per architecture; and the share of step time spent building batches
// (target: under 2%).
//
//   build/bin/hlab-bench-train                 # default grid
//   build/bin/hlab-bench-train --steps 20 --seq-len 512 --d-model 128
//
// Each architecture trains the same task (synthetic data, 1:1 long/short)
// in this process, after 3 warm-up steps; the data share is the time spent
// in sampling and packing batches over the time of the step loop. A second
// figure times batch building alone, without the model, for the same
// batches.
//
// --prepared DIR trains on a prepared dataset instead (hlab-data prepare's
// output: memory-mapped shards, split by length at --seq-len into long and
// short documents, 1:1), with the model's vocabulary the dataset's:
//
//   build/bin/hlab-bench-train --prepared /tmp/c4-llama3 --seq-len 1024
//
// --q-grad-every N adds the Q-gradient hook's cost (analysis.
// q_grad_every_steps = N, records dropped): each architecture with a
// full-attention head trains the same task with and without the hook,
// alternating, 3 times each; the column is the median time with the hook
// over the median without, minus 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/openmp_env.h"
#include "common/status_macros.h"
#include "data/mixture.h"
#include "model/config/model_config.h"
#include "train/malloc_reuse.h"
#include "train/records.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace {

using Json = nlohmann::json;

struct Options {
  int64_t steps = 20, seq_len = 256, batch_tokens = 8192, d_model = 128;
  int64_t layers = 4, threads = 0, q_grad_every = 0;
  std::vector<std::string> archs = {"full", "swa-64", "lightning", "mamba2",
                                    "gdn"};
  bool json = false;
  std::string prepared;  // a prepared dataset's directory, or synthetic data
  int64_t vocab_size = 258;  // the prepared dataset's, once opened
};

Json TaskFor(const Options& o, const std::string& arch, int64_t steps) {
  Json j = {{"model",
             {{"arch", arch},
              {"d_model", o.d_model},
              {"n_layers", o.layers},
              {"n_heads", o.d_model / 32},
              {"n_kv_heads", std::max<int64_t>(1, o.d_model / 64)},
              {"vocab_size", o.vocab_size}}},
            {"seq_len", o.seq_len},
            {"batch_tokens", o.batch_tokens},
            {"budget_tokens", steps * o.batch_tokens},
            {"schedule", {{"warmup_steps", 1}}},
            {"threads", o.threads},
            {"log_every_steps", 1000000},
            {"eval", {{"sequences", 0}}}};
  if (!o.prepared.empty()) {
    j["data"] = {{"source", "prepared"},
                 {"long_dir", o.prepared},
                 {"short_dir", o.prepared},
                 {"long_fraction", 0.5}};
  }
  return j;
}

// Median step-loop time with the hook over the median without, minus 1;
// InvalidArgument when the architecture has no full-attention head.
absl::StatusOr<double> HookOverhead(const Options& o, const std::string& arch,
                                    int64_t steps) {
  std::vector<double> off, on;
  hlab::train::RecordWriter dropped(nullptr,
                                    hlab::train::RecordWriter::Human::kNone);
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (const bool hooked : {false, true}) {
      Json j = TaskFor(o, arch, steps);
      if (hooked) j["analysis"] = {{"q_grad_every_steps", o.q_grad_every}};
      auto task = hlab::task::TrainTaskFromJson(j.dump());
      if (!task.ok()) return task.status();
      HLAB_RETURN_IF_ERROR(hlab::task::ValidateTrainTask(*task));
      auto trainer = hlab::train::Trainer::Create(*task, &dropped);
      if (!trainer.ok()) return trainer.status();
      HLAB_RETURN_IF_ERROR((*trainer)->Run());
      (hooked ? on : off).push_back((*trainer)->time().total_seconds);
    }
  }
  std::sort(off.begin(), off.end());
  std::sort(on.begin(), on.end());
  return on[1] / off[1] - 1;
}

}  // namespace

int main(int argc, char** argv) {
  hlab::EnsurePassiveOpenMpWait(argv);
  hlab::train::KeepFreedMemoryForReuse();
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next_int = [&](int64_t* out) {
      if (i + 1 >= argc || !absl::SimpleAtoi(argv[++i], out) || *out <= 0) {
        std::cerr << "hlab-bench-train: " << arg
                  << " needs a positive integer\n";
        std::exit(2);
      }
    };
    if (arg == "--steps")
      next_int(&o.steps);
    else if (arg == "--seq-len")
      next_int(&o.seq_len);
    else if (arg == "--batch-tokens")
      next_int(&o.batch_tokens);
    else if (arg == "--d-model")
      next_int(&o.d_model);
    else if (arg == "--layers")
      next_int(&o.layers);
    else if (arg == "--threads")
      next_int(&o.threads);
    else if (arg == "--q-grad-every")
      next_int(&o.q_grad_every);
    else if (arg == "--arch" && i + 1 < argc)
      o.archs = {argv[++i]};
    else if (arg == "--prepared" && i + 1 < argc)
      o.prepared = argv[++i];
    else if (arg == "--json")
      o.json = true;
    else {
      std::cout << "usage: hlab-bench-train [--steps N] [--seq-len N] "
                   "[--batch-tokens N] [--d-model N] [--layers N] "
                   "[--threads N] [--arch NAME] [--q-grad-every N] "
                   "[--prepared DIR] [--json]\n";
      return arg == "--help" ? 0 : 2;
    }
  }
  if (!o.prepared.empty()) {
    // Opened once first, for its vocabulary: the model's is the dataset's
    // (the largest a model may have passes the check that it covers it).
    o.vocab_size = hlab::model::kMaxVocab;
    auto task = hlab::task::TrainTaskFromJson(TaskFor(o, o.archs[0], 1).dump());
    absl::StatusOr<std::unique_ptr<hlab::train::TrainingData>> data =
        task.ok() ? hlab::train::TrainingData::Create(*task)
                  : absl::StatusOr<std::unique_ptr<hlab::train::TrainingData>>(
                        task.status());
    if (!data.ok()) {
      std::cerr << "hlab-bench-train: --prepared " << o.prepared << ": "
                << data.status().message() << "\n";
      return 2;
    }
    o.vocab_size = (*data)->vocabulary().size;
  }
  if (!o.json) {
    std::printf(
        "hlab-bench-train: d_model %lld, %lld layers, seq_len %lld, "
        "%lld tokens/step, %lld steps (+3 warm-up), %u cores, %s\n",
        static_cast<long long>(o.d_model), static_cast<long long>(o.layers),
        static_cast<long long>(o.seq_len),
        static_cast<long long>(o.batch_tokens), static_cast<long long>(o.steps),
        std::thread::hardware_concurrency(),
        o.prepared.empty() ? "synthetic data"
                           : ("prepared data " + o.prepared + ", vocabulary " +
                              std::to_string(o.vocab_size))
                                 .c_str());
    std::printf("%-10s %12s %12s %14s %16s %10s\n", "arch", "tok/s", "ms/step",
                "data share", "data-only tok/s", "q-grad hook");
  }
  for (const std::string& arch : o.archs) {
    // Warm-up run (allocator, OpenMP pool), then the measured run.
    for (int pass = 0; pass < 2; ++pass) {
      const int64_t steps = pass == 0 ? 3 : o.steps;
      auto task = hlab::task::TrainTaskFromJson(TaskFor(o, arch, steps).dump());
      if (!task.ok()) {
        std::cerr << "hlab-bench-train: " << task.status().message() << "\n";
        return 2;
      }
      auto trainer = hlab::train::Trainer::Create(*task, nullptr);
      if (!trainer.ok()) {
        std::cerr << "hlab-bench-train: " << trainer.status().message() << "\n";
        return 2;
      }
      if (absl::Status s = (*trainer)->Run(); !s.ok()) {
        std::cerr << "hlab-bench-train: " << s.message() << "\n";
        return 1;
      }
      if (pass == 0) continue;
      const hlab::train::TrainingTime& t = (*trainer)->time();
      // Batch building alone, same batches.
      auto data = hlab::train::TrainingData::Create(*task);
      const int64_t sequences = o.batch_tokens / o.seq_len * steps;
      const auto start = std::chrono::steady_clock::now();
      int64_t checksum = 0;
      for (int64_t k = 0; k < sequences; ++k) {
        checksum += (*data)->train().Sample(k)->tokens[1];
      }
      const double data_only = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
      const double tokens = static_cast<double>(steps * o.batch_tokens);
      const double share = t.data_seconds / t.total_seconds;
      std::optional<double> hook;
      if (o.q_grad_every > 0) {
        absl::StatusOr<double> h = HookOverhead(o, arch, steps);
        if (h.ok()) {
          hook = *h;
        } else if (!absl::IsInvalidArgument(h.status())) {
          std::cerr << "hlab-bench-train: " << h.status().message() << "\n";
          return 1;
        }  // else: no full-attention head to hook
      }
      if (o.json) {
        std::cout << Json{{"arch", arch},
                          {"tokens_per_s", tokens / t.total_seconds},
                          {"ms_per_step", 1e3 * t.total_seconds / steps},
                          {"data_share", share},
                          {"data_only_tokens_per_s", tokens / data_only},
                          {"q_grad_hook_overhead",
                           hook ? Json(*hook) : Json(nullptr)},
                          {"checksum", checksum}}
                         .dump()
                  << "\n";
      } else {
        const std::string hook_text =
            hook ? absl::StrFormat("%+.1f%%", 100 * *hook) : std::string("-");
        std::printf("%-10s %12.0f %12.1f %13.2f%% %16.3g %10s\n", arch.c_str(),
                    tokens / t.total_seconds, 1e3 * t.total_seconds / steps,
                    100 * share, tokens / data_only, hook_text.c_str());
      }
    }
  }
  return 0;
}
