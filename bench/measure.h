// Measurements shared by the benchmarks: one training-step benchmark of a
// model config, one mixer-layer benchmark, the matmul peak and peak RSS.
//
// Each measurement is meant to run in its own process (hlab-bench re-executes
// itself per configuration) so that peak RSS belongs to that configuration.
// Not thread-safe.
//
//   StepOptions options;
//   options.seq_len = 1024;
//   options.batch = 8;
//   StepResult r = MeasureTrainingStep(config, options);
//   std::cout << r.tokens_per_s;
#ifndef HLAB_BENCH_MEASURE_H_
#define HLAB_BENCH_MEASURE_H_

#include <cstdint>
#include <string>

#include "model/config/model_config.h"

namespace hlab::bench {

// Steps run before the timed ones, so that the timed steps are a training
// run's steady state. Two: glibc's heap still grows into fresh pages in the
// second step (gdn, T=8192, fp32: 237K page faults in step 1, 31K in step
// 2, 2K in step 3, none after; SwiGLU's backward took 12 ms writing into
// fresh pages against 3.4 ms into reused memory). With one warmup the
// timed steps measured the allocator's growth as well
// (docs/performance.md, "Two warmup steps").
inline constexpr int64_t kWarmupSteps = 2;

struct StepOptions {
  int64_t seq_len = 1024;
  int64_t batch = 8;
  // kWarmupSteps warmups, then the timed steps; with fewer than
  // kWarmupSteps + 1 steps, all but the last are warmups.
  int64_t steps = 4;
  bool bf16 = false;
  uint64_t seed = 0;
  // If set, MeasureTrainingStep writes a Chrome trace of the last step
  // (LibTorch's profiler: one event per op and autograd node) to this file.
  // The profiler slows the step it records; that step's time still counts.
  std::string profile_path;
};

struct StepResult {
  double step_ms = 0;  // median over the timed steps (of two, the slower)
  // Median process CPU time (user + system, all threads) of the timed steps:
  // on a shared machine, steadier than wall time at one thread (at more,
  // it also counts threads spinning while they wait).
  double step_cpu_ms = 0;
  double tokens_per_s = 0;
  double peak_rss_mb = 0;
  double baseline_rss_mb = 0;  // peak RSS before the inputs were allocated
  double first_loss = 0;  // loss of step 1 (same init and batch for any dtype)
  // MeasureTrainingStep's step in three parts, medians over the timed steps
  // (so they need not add up to step_ms exactly): the forward pass and loss;
  // zeroing the gradients and the backward pass; clipping and the AdamW
  // update.
  double forward_ms = 0;
  double backward_ms = 0;
  double update_ms = 0;
};

// One training step = forward, fp32 cross-entropy, backward, grad clip 1.0,
// AdamW. Random byte tokens.
StepResult MeasureTrainingStep(const model::ModelConfig& config,
                               const StepOptions& options);

// Forward + backward of one mixer layer alone, x: (batch, seq_len, d).
StepResult MeasureMixerLayer(const model::ModelConfig& config,
                             const model::MixerSpec& spec,
                             const StepOptions& options);

// Median GFLOP/s of a 2048 x 2048 matmul (fp32 or bf16) on
// at::get_num_threads() threads, no more (fp32: one single-threaded
// OpenBLAS product a thread, as the model's products run). Holds OpenBLAS
// to one thread for the rest of the process, as the model's first product
// does.
double MatmulPeakGflops(bool bf16);

// Peak resident set size of this process so far, in MiB.
double PeakRssMb();

// Whether this CPU runs bf16 matmuls natively (AVX512-BF16 or AMX).
bool CpuHasBf16();

// The CPU the figures come from, for the benchmark's header: its model
// name from /proc/cpuinfo and which of the ISA extensions the kernels'
// speed depends on it has, e.g. "AMD EPYC 9R45 (avx512f avx512_bf16)" or
// "Intel(R) Xeon(R) Processor (avx512f avx512_bf16 amx_bf16)"; "unknown"
// where /proc/cpuinfo cannot be read.
std::string CpuDescription();

}  // namespace hlab::bench

#endif  // HLAB_BENCH_MEASURE_H_
