#include "bench/measure.h"
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/hybrid_lm.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"
#include "train/optimizer.h"

namespace hlab::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Process CPU time (all threads), in ms.
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 +
         static_cast<double>(ts.tv_nsec) / 1e6;
}

// The untimed steps of a measurement: kWarmupSteps, or all but the last.
int64_t WarmupSteps(const StepOptions& options) {
  return std::max<int64_t>(0, std::min(kWarmupSteps, options.steps - 1));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

class AutocastScope {
 public:
  explicit AutocastScope(bool on) : on_(on) {
    if (on_) {
      hlab::model::SetAutocastDtype(torch::kCPU, at::kBFloat16);
      hlab::model::SetAutocastEnabled(torch::kCPU, true);
    }
  }
  ~AutocastScope() {
    if (on_) {
      hlab::model::SetAutocastEnabled(torch::kCPU, false);
      at::autocast::clear_cache();
    }
  }

 private:
  bool on_;
};

}  // namespace

StepResult MeasureTrainingStep(const model::ModelConfig& config,
                               const StepOptions& options) {
  torch::manual_seed(options.seed);
  StepResult result;
  result.baseline_rss_mb = PeakRssMb();
  model::HybridLM lm(config);
  auto optimizer = train::MakeAdamW(*lm, {.lr = 1e-3});
  torch::Tensor tokens =
      torch::randint(0, config.vocab_size, {options.batch, options.seq_len + 1},
                     torch::kInt64);
  torch::Tensor inputs = tokens.narrow(1, 0, options.seq_len);
  torch::Tensor targets = tokens.narrow(1, 1, options.seq_len);
  std::vector<double> times, cpu_times, forward, backward, update;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  for (int64_t step = 0; step < options.steps; ++step) {
    const auto start = Clock::now();
    const double cpu_start = ProcessCpuMs();
    torch::Tensor loss;
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
    if (!options.profile_path.empty() && step == options.steps - 1) {
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(
          options.profile_path);
    }
    {
      AutocastScope autocast(options.bf16);
      loss = lm->loss(inputs, targets);
    }
    const double forward_ms = ms_since(start);
    const auto backward_start = Clock::now();
    train::ClearGradients(*optimizer);
    loss.backward();
    const double backward_ms = ms_since(backward_start);
    const auto update_start = Clock::now();
    train::ClipGradNorm(*lm, 1.0);
    optimizer->step();
    const double update_ms = ms_since(update_start);
    profile.reset();  // writes the trace
    const double ms = ms_since(start);
    const double cpu_ms = ProcessCpuMs() - cpu_start;
    if (step == 0) result.first_loss = loss.item<double>();
    if (step >= WarmupSteps(options)) {
      times.push_back(ms);
      cpu_times.push_back(cpu_ms);
      forward.push_back(forward_ms);
      backward.push_back(backward_ms);
      update.push_back(update_ms);
    }
  }
  result.forward_ms = Median(forward);
  result.backward_ms = Median(backward);
  result.update_ms = Median(update);
  result.step_ms = Median(times);
  result.step_cpu_ms = Median(cpu_times);
  result.tokens_per_s = static_cast<double>(options.batch * options.seq_len) /
                        (result.step_ms / 1000.0);
  result.peak_rss_mb = PeakRssMb();
  return result;
}

StepResult MeasureMixerLayer(const model::ModelConfig& config,
                             const model::MixerSpec& spec,
                             const StepOptions& options) {
  torch::manual_seed(options.seed);
  std::shared_ptr<model::Mixer> mixer = model::MakeMixer(config, spec, 0);
  StepResult result;
  result.baseline_rss_mb = PeakRssMb();
  torch::Tensor x =
      torch::randn({options.batch, options.seq_len, config.d_model})
          .requires_grad_(true);
  std::vector<double> times, cpu_times;
  for (int64_t step = 0; step < options.steps; ++step) {
    const auto start = Clock::now();
    const double cpu_start = ProcessCpuMs();
    torch::Tensor y;
    {
      AutocastScope autocast(options.bf16);
      y = mixer->forward(x);
    }
    y.to(torch::kFloat32).square().mean().backward();
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const double cpu_ms = ProcessCpuMs() - cpu_start;
    if (step >= WarmupSteps(options)) {
      times.push_back(ms);
      cpu_times.push_back(cpu_ms);
    }
    x.mutable_grad() = torch::Tensor();
    mixer->zero_grad();
  }
  result.step_ms = Median(times);
  result.step_cpu_ms = Median(cpu_times);
  result.tokens_per_s = static_cast<double>(options.batch * options.seq_len) /
                        (result.step_ms / 1000.0);
  result.peak_rss_mb = PeakRssMb();
  return result;
}

double MatmulPeakGflops(bool bf16) {
  const int64_t n = 2048;
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
  const torch::Tensor a = torch::randn({n, n}).to(dtype);
  const torch::Tensor b = torch::randn({n, n}).to(dtype);
  // bf16: one oneDNN matmul, which runs on the intra-op threads. fp32: one
  // single-threaded OpenBLAS matmul per intra-op thread at once, as a
  // step's products run: model::LinearProduct's first call holds OpenBLAS
  // to one thread for the process (model/layers/linear.h) and the model
  // splits its products over the intra-op threads. A bare torch::mm would
  // run on OpenBLAS's own pool, all cores whatever at::get_num_threads()
  // says: until 2026-12-07 the micro benchmark's "1 thread" peak was
  // measured that way, on both cores of the 2-core VM (188 GFLOP/s against
  // one core's 100; docs/performance.md, "Micro-model steps").
  const int64_t copies = bf16 ? 1 : at::get_num_threads();
  if (!bf16) {
    model::LinearProduct(torch::ones({1, 1}), torch::ones({1, 1}));
  }
  std::vector<torch::Tensor> c(copies);
  const auto products = [&] {
    if (bf16) {
      c[0] = torch::mm(a, b);
      return;
    }
    at::parallel_for(0, copies, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) c[i] = torch::mm(a, b);
    });
  };
  torch::NoGradGuard no_grad;
  products();  // warm up
  std::vector<double> rates;
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    products();
    const double s =
        std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(static_cast<double>(copies) * 2.0 * n * n * n / s / 1e9);
  }
  return Median(rates);
}

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

bool CpuHasBf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find("avx512_bf16") != std::string::npos ||
             line.find("amx_bf16") != std::string::npos;
    }
  }
  return false;
}

std::string CpuDescription() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(cpuinfo, line) && (model.empty() || flags.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    if (model.empty() && line.rfind("model name", 0) == 0) {
      model = line.substr(colon + 2);
    } else if (flags.empty() && line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(colon + 2) + " ";
    }
  }
  if (model.empty() && flags.empty()) return "unknown";
  std::string isa;
  for (const char* flag : {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}) {
    if (flags.find(std::string(" ") + flag + " ") != std::string::npos) {
      isa += isa.empty() ? flag : std::string(" ") + flag;
    }
  }
  return (model.empty() ? std::string("unknown model") : model) + " (" +
         (isa.empty() ? std::string("none of avx2, avx512f, bf16") : isa) + ")";
}

}  // namespace hlab::bench
