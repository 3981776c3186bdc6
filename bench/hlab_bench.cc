// hlab-bench: training-step throughput of the hybrid architectures, side by
// side with the eager-PyTorch reference in ../shared/anchors, and the
// project's performance targets (docs/performance.md).
//
// The driver re-executes itself once per configuration (--child-step or
// --child-layer) so that each peak RSS belongs to one configuration and an
// out-of-memory configuration cannot take the whole run down.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/measure.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "train/malloc_reuse.h"

namespace {

using Json = nlohmann::json;
using hlab::model::ModelConfig;

constexpr char kUsage[] = R"(usage: hlab-bench [options]

Measures one training step (forward, backward, AdamW) per architecture and
sequence length, fp32 and bf16 autocast, and prints the performance targets.

  --archs LIST          default full,swa-128,lightning,mamba2,gdn; names or
                        layer patterns, separated by ';' when any is a
                        pattern (itself comma-separated):
                        --archs 'full;full,swa:16;full,gdn'
  --seq-lens LIST       default 1024,4096,8192,16384
  --bf16-seq-lens LIST  sequence lengths also run in bf16 (default 1024)
  --tokens-per-step N   batch = max(1, N / seq_len) (default 8192)
  --steps N             steps per configuration, the first two warmups
                        (default 4: two timed steps, the slower reported)
  --rounds N            run every configuration N times, alternating the
                        order each round, and report the medians (default 1;
                        on a machine whose speed drifts, use 7 for the ratio
                        targets: on the 2-core VM single rounds of the T=8192
                        ratios varied by +-10%); the ratio targets list each
                        round's ratio and their median
  --d-model N --layers N --heads N --kv-heads N --vocab N
                        model shape (default the anchors': 256, 4, 4, 2, 256)
  --threads N           intra-op threads (default: all cores)
  --reference           also run ../shared/anchors/torch_reference.py (or
                        $HLAB_SHARED_DIR/anchors) on the same shapes
  --reference-max-seq-len N   longest T given to the reference (default 8192:
                        it materialises T x T scores and cannot train 16384)
  --no-layer-bench      skip the SWA-layer time/memory scaling check
  --quick               full,swa-128,gdn at T=1024 only, 2 steps
  --micro               the demo's largest model (examples/sweeps/demo.yaml:
                        d_model 72, 2 layers, 4 heads, 2 KV, vocab 258, T=128,
                        4 sequences a step, one thread) in full and the
                        demo's hybrids, their full layer first (full,swa:16,
                        full,swa:64, full,gdn), 3 rounds, with the target that a
                        step costs at most 3x its FLOP time at the matmul
                        peak measured on the same cores (one thread: one
                        core; #21: micro studies are many tiny steps),
                        and the step's forward, backward and clip + AdamW
                        times; other flags given with it override its values
  --json                one JSON object per line instead of tables
  --profile DIR         write a Chrome trace (chrome://tracing, Perfetto) of
                        each configuration's last training step to
                        DIR/<arch>-T<seq_len>-<dtype>.json. LibTorch's
                        profiler slows the steps it records: do not compare
                        a profiled run's times with an unprofiled one's
)";

struct Options {
  std::vector<std::string> archs = {"full", "swa-128", "lightning", "mamba2",
                                    "gdn"};
  std::vector<int64_t> seq_lens = {1024, 4096, 8192, 16384};
  std::vector<int64_t> bf16_seq_lens = {1024};
  int64_t tokens_per_step = 8192, steps = 4;
  int64_t d_model = 256, layers = 4, heads = 4, kv_heads = 2, vocab = 256;
  int64_t threads = 0, reference_max_seq_len = 8192;
  bool reference = false, layer_bench = true, json = false;
  std::string profile_dir;  // --profile
  int64_t rounds = 1;       // --rounds
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "hlab-bench: " << message << "\n";
  std::exit(2);
}

// --archs: comma-separated names, or ';'-separated when an entry is a
// layer pattern, whose layers are comma-separated ("full;full,gdn").
std::vector<std::string> ParseArchs(const std::string& text) {
  const char sep = text.find(';') != std::string::npos ? ';' : ',';
  std::vector<std::string> out =
      absl::StrSplit(text, sep, absl::SkipWhitespace());
  if (out.empty()) Fail("--archs: no architecture given");
  return out;
}

std::vector<int64_t> ParseIntList(const std::string& flag,
                                  const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      Fail(absl::StrCat(flag, ": '", part, "' is not a positive integer"));
    }
    out.push_back(v);
  }
  return out;
}

ModelConfig BuildConfig(const Options& o, const std::string& arch) {
  ModelConfig c;
  c.vocab_size = o.vocab;
  c.d_model = o.d_model;
  c.n_layers = o.layers;
  c.n_heads = o.heads;
  c.n_kv_heads = o.kv_heads;
  c.head_dim = o.d_model / o.heads;
  c.ffn_hidden = hlab::model::DefaultFfnHidden(o.d_model);
  c.arch = arch;
  auto layers = hlab::model::ExpandArchitecture(arch, o.layers);
  if (!layers.ok()) Fail(std::string(layers.status().message()));
  c.layers = *layers;
  absl::Status valid = hlab::model::ValidateModelConfig(c);
  if (!valid.ok()) Fail(absl::StrCat(arch, ": ", valid.message()));
  return c;
}

std::string SharedDir() {
  const char* env = std::getenv("HLAB_SHARED_DIR");
  return env ? env : "../shared";
}

// Runs a command and returns the last line of its stdout that parses as a
// JSON object, or nullopt (with the reason in *error).
std::optional<Json> RunForJson(const std::string& command, std::string* error) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) {
    *error = "cannot start: " + command;
    return std::nullopt;
  }
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  const int status = pclose(pipe);
  std::optional<Json> last;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) last = j;
  }
  if (!last) {
    *error =
        WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 137)
            ? "killed (out of memory?)"
            : absl::StrCat("failed (exit ", WEXITSTATUS(status), ")");
  }
  return last;
}

// Debian's python3-torch lives under /usr/bin/python3 (a python3 earlier on
// PATH, e.g. pyenv's, may not have torch).
std::string ReferencePython() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

std::string SelfExe() {
  std::array<char, 4096> path{};
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) Fail("cannot find my own executable");
  return std::string(path.data(), static_cast<size_t>(n));
}

std::string ShapeFlags(const Options& o) {
  return absl::StrCat(
      " --d-model ", o.d_model, " --layers ", o.layers, " --heads ", o.heads,
      " --kv-heads ", o.kv_heads, " --vocab ", o.vocab,
      o.threads > 0 ? absl::StrCat(" --threads ", o.threads) : std::string());
}

// Child: one configuration, one JSON line.
int RunChild(const Options& o, const std::string& mode, const std::string& arch,
             int64_t seq_len, int64_t batch, bool bf16,
             const std::string& profile_path) {
  hlab::bench::StepOptions step{.seq_len = seq_len,
                                .batch = batch,
                                .steps = o.steps,
                                .bf16 = bf16,
                                .profile_path = profile_path};
  ModelConfig config;
  hlab::bench::StepResult r;
  try {
    if (mode == "step") {
      config = BuildConfig(o, arch);
      r = hlab::bench::MeasureTrainingStep(config, step);
    } else {
      config = BuildConfig(o, "full");
      auto spec = hlab::model::ParseLayerSpec(arch);
      if (!spec.ok()) Fail(std::string(spec.status().message()));
      r = hlab::bench::MeasureMixerLayer(config, *spec, step);
    }
  } catch (const std::exception& e) {
    Json j = {{"error", e.what()}};
    std::cout << j.dump() << std::endl;
    return 1;
  }
  Json j = {{"tokens_per_s", r.tokens_per_s},
            {"step_ms", r.step_ms},
            {"step_cpu_ms", r.step_cpu_ms},
            {"peak_rss_mb", r.peak_rss_mb},
            {"baseline_rss_mb", r.baseline_rss_mb},
            {"first_loss", r.first_loss},
            {"forward_ms", r.forward_ms},
            {"backward_ms", r.backward_ms},
            {"update_ms", r.update_ms}};
  std::cout << j.dump() << std::endl;
  return 0;
}

struct Row {
  Json j;
  bool ok = false;
};

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Fmt(double v, int precision = 0) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(precision);
  s << v;
  return s.str();
}

// With --rounds > 1: "; each round A, B, ... (median M)", the ratio of
// slow's step time to fast's in each round. A round runs the two close
// together, so these pair the measurements and cancel the machine's slow
// drift that the ratio of the medians carries; the targets' verdicts stay
// on the medians. Empty with one round.
std::string EachRound(const Row& slow, const Row& fast) {
  if (!slow.j.contains("step_ms_rounds") ||
      !fast.j.contains("step_ms_rounds")) {
    return "";
  }
  const auto s = slow.j["step_ms_rounds"].get<std::vector<double>>();
  const auto f = fast.j["step_ms_rounds"].get<std::vector<double>>();
  std::vector<double> ratios;
  std::vector<std::string> each;
  for (size_t i = 0; i < std::min(s.size(), f.size()); ++i) {
    ratios.push_back(s[i] / f[i]);
    each.push_back(Fmt(ratios.back(), 2) + "x");
  }
  if (ratios.empty()) return "";
  return absl::StrCat("; each round ", absl::StrJoin(each, ", "), " (median ",
                      Fmt(MedianOf(ratios), 2), "x)");
}

// The command line: the benchmark's options, or a child's (--child-step,
// --child-layer: one configuration measured in its own process).
struct CommandLine {
  Options o;
  std::string child_mode, child_arch;
  int64_t child_seq = 0, child_batch = 0;
  bool child_bf16 = false, quick = false, micro = false;
  std::string child_profile;
};

// Reads the flags (--help prints the usage and exits 0; a bad flag fails
// naming it).
CommandLine ParseCommandLine(int argc, char** argv) {
  CommandLine c;
  std::map<std::string, int64_t*> ints = {
      {"--tokens-per-step", &c.o.tokens_per_step},
      {"--steps", &c.o.steps},
      {"--rounds", &c.o.rounds},
      {"--d-model", &c.o.d_model},
      {"--layers", &c.o.layers},
      {"--heads", &c.o.heads},
      {"--kv-heads", &c.o.kv_heads},
      {"--vocab", &c.o.vocab},
      {"--threads", &c.o.threads},
      {"--reference-max-seq-len", &c.o.reference_max_seq_len},
      {"--child-seq-len", &c.child_seq},
      {"--child-batch", &c.child_batch}};
  // --micro is a preset: applied first, so flags given with it (--archs,
  // --threads, --rounds, ...) override its values.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--micro") continue;
    c.micro = true;
    // The demo's architectures (examples/sweeps/demo.yaml): its hybrids are
    // patterns with the full layer first, not the named [efficient, full].
    c.o.archs = {"full", "full,swa:16", "full,swa:64", "full,gdn"};
    c.o.seq_lens = {128};
    c.o.bf16_seq_lens = {};
    c.o.tokens_per_step = 512;  // the demo's batch: 4 x 128
    c.o.d_model = 72;
    c.o.layers = 2;
    c.o.heads = 4;
    c.o.kv_heads = 2;
    c.o.vocab = 258;
    c.o.threads = 1;
    c.o.steps = 8;
    c.o.rounds = 3;
    c.o.layer_bench = false;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(arg + " needs a value (see --help)");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (ints.count(arg)) {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, ints[arg]) || *ints[arg] <= 0) {
        Fail(arg + " must be a positive integer, got '" + v + "'");
      }
    } else if (arg == "--archs") {
      c.o.archs = ParseArchs(value());
    } else if (arg == "--seq-lens") {
      c.o.seq_lens = ParseIntList(arg, value());
    } else if (arg == "--bf16-seq-lens") {
      const std::string v = value();
      c.o.bf16_seq_lens =
          v == "none" ? std::vector<int64_t>{} : ParseIntList(arg, v);
    } else if (arg == "--reference") {
      c.o.reference = true;
    } else if (arg == "--no-layer-bench") {
      c.o.layer_bench = false;
    } else if (arg == "--quick") {
      c.quick = true;
    } else if (arg == "--micro") {
      // applied above
    } else if (arg == "--json") {
      c.o.json = true;
    } else if (arg == "--profile") {
      c.o.profile_dir = value();
    } else if (arg == "--child-profile") {
      c.child_profile = value();
    } else if (arg == "--child-step" || arg == "--child-layer") {
      c.child_mode = arg == "--child-step" ? "step" : "layer";
      c.child_arch = value();
    } else if (arg == "--child-bf16") {
      c.child_bf16 = true;
    } else {
      Fail("unknown option '" + arg + "' (see --help)");
    }
  }
  return c;
}

// The row of (arch, T, dtype), or nullptr.
const Row* FindRow(const std::vector<Row>& rows, const std::string& arch,
                   int64_t t, const std::string& dtype) {
  for (const Row& r : rows) {
    if (r.j["arch"] == arch && r.j["seq_len"] == t && r.j["dtype"] == dtype) {
      return &r;
    }
  }
  return nullptr;
}

// The performance targets (docs/performance.md, "Targets") judged on the
// measured rows and SWA layer rows: one {target, pass, detail} each.
std::vector<Json> EvaluateTargets(const Options& o, bool micro, bool cpu_bf16,
                                  const std::vector<Row>& rows,
                                  const std::vector<Json>& layer_rows) {
  std::vector<Json> targets;
  auto target = [&](const std::string& name, bool pass,
                    const std::string& detail) {
    targets.push_back({{"target", name}, {"pass", pass}, {"detail", detail}});
  };
  for (const Row& r : rows) {
    if (!r.ok || !r.j.contains("speedup_vs_reference") ||
        r.j["dtype"] != "fp32") {
      continue;
    }
    const std::string arch = r.j["arch"];
    const double need = arch == "full" ? 1.1 : 1.5;
    const double got = r.j["speedup_vs_reference"].get<double>();
    target(absl::StrCat(arch, " T=", r.j["seq_len"].get<int64_t>(),
                        " vs reference >= ", Fmt(need, 1), "x"),
           got >= need, Fmt(got, 2) + "x");
  }
  for (const Row& r : rows) {
    if (!micro || !r.ok || r.j["dtype"] != "fp32") continue;
    // A step's time over the time its FLOPs take at the matmul peak.
    const double ratio = 1.0 / r.j["mfu"].get<double>();
    target(absl::StrCat(r.j["arch"].get<std::string>(), " micro (d_model ",
                        o.d_model, ", T=", r.j["seq_len"].get<int64_t>(),
                        ") step <= 3x its FLOP time"),
           ratio <= 3.0,
           absl::StrCat(
               Fmt(ratio, 2), "x (MFU ", Fmt(100 * r.j["mfu"].get<double>()),
               "%, ", Fmt(r.j["step_ms"].get<double>(), 2),
               " ms a step: forward ", Fmt(r.j["forward_ms"].get<double>(), 2),
               ", backward ", Fmt(r.j["backward_ms"].get<double>(), 2),
               ", clip + AdamW ", Fmt(r.j["update_ms"].get<double>(), 2), ")"));
  }
  for (const std::string arch : {"swa-128", "gdn"}) {
    const Row* full = FindRow(rows, "full", 8192, "fp32");
    const Row* other = FindRow(rows, arch, 8192, "fp32");
    if (full && other && full->ok && other->ok) {
      const double speed = other->j["tokens_per_s"].get<double>() /
                           full->j["tokens_per_s"].get<double>();
      const double flop_ratio = full->j["flops_per_token"].get<double>() /
                                other->j["flops_per_token"].get<double>();
      const double cpu_speed = full->j["step_cpu_ms"].get<double>() /
                               other->j["step_cpu_ms"].get<double>();
      const std::string rounds = EachRound(*full, *other);
      target(absl::StrCat(arch, "/full speed at T=8192 >= 90% of FLOP ratio"),
             speed >= 0.9 * flop_ratio,
             absl::StrCat(Fmt(speed, 2), "x vs FLOP ratio ", Fmt(flop_ratio, 2),
                          "x (", Fmt(100 * speed / flop_ratio),
                          "%); by CPU time ", Fmt(cpu_speed, 2), "x (",
                          Fmt(100 * cpu_speed / flop_ratio), "%)", rounds));
    }
  }
  for (const std::string& arch : o.archs) {
    const Row* r = FindRow(rows, arch, 16384, "fp32");
    if (r) {
      target(absl::StrCat(arch, " trains at T=16384 within 24 GiB"),
             r->ok && r->j["peak_rss_mb"].get<double>() < 24 * 1024,
             r->ok ? absl::StrCat(Fmt(r->j["peak_rss_mb"].get<double>()), " MB")
                   : r->j["error"].get<std::string>());
    }
  }
  if (layer_rows.size() == 2 && !layer_rows[0].contains("error") &&
      !layer_rows[1].contains("error")) {
    const double time_ratio = layer_rows[1]["us_per_token"].get<double>() /
                              layer_rows[0]["us_per_token"].get<double>();
    const double mem_ratio =
        layer_rows[1]["kb_per_token"].get<double>() /
        std::max(1e-9, layer_rows[0]["kb_per_token"].get<double>());
    target(
        "SWA-128 layer per-token time 16384 vs 2048 <= 1.3x", time_ratio <= 1.3,
        absl::StrCat(
            Fmt(time_ratio, 2), "x (",
            Fmt(layer_rows[0]["us_per_token"].get<double>(), 1), " -> ",
            Fmt(layer_rows[1]["us_per_token"].get<double>(), 1), " us/token)"));
    target("SWA-128 layer per-token memory 16384 vs 2048 <= 1.3x",
           mem_ratio <= 1.3,
           absl::StrCat(Fmt(mem_ratio, 2), "x (",
                        Fmt(layer_rows[0]["kb_per_token"].get<double>(), 1),
                        " -> ",
                        Fmt(layer_rows[1]["kb_per_token"].get<double>(), 1),
                        " KB/token)"));
  }
  for (const std::string& arch : o.archs) {
    for (int64_t t : o.bf16_seq_lens) {
      const Row* f = FindRow(rows, arch, t, "fp32");
      const Row* b = FindRow(rows, arch, t, "bf16");
      if (f && b && f->ok && b->ok) {
        const double speed = b->j["tokens_per_s"].get<double>() /
                             f->j["tokens_per_s"].get<double>();
        const double cpu_speed = f->j["step_cpu_ms"].get<double>() /
                                 b->j["step_cpu_ms"].get<double>();
        const double loss_diff = std::abs(b->j["first_loss"].get<double>() -
                                          f->j["first_loss"].get<double>());
        target(
            absl::StrCat(arch, " T=", t, " bf16 >= 1.8x fp32",
                         cpu_bf16 ? "" : " (no native bf16: not applicable)"),
            !cpu_bf16 || speed >= 1.8,
            absl::StrCat(Fmt(speed, 2), "x (by CPU time ", Fmt(cpu_speed, 2),
                         "x); |loss bf16 - fp32| = ", Fmt(loss_diff, 4),
                         " (tolerance 0.02)", EachRound(*f, *b)));
        target(
            absl::StrCat(arch, " T=", t, " bf16 loss matches fp32 within 0.02"),
            loss_diff <= 0.02, Fmt(loss_diff, 4));
      }
    }
  }
  return targets;
}

}  // namespace

int main(int argc, char** argv) {
  hlab::train::KeepFreedMemoryForReuse();
  CommandLine cl = ParseCommandLine(argc, argv);
  Options& o = cl.o;
  // LibTorch (Debian) starts with one intra-op thread: set it explicitly.
  at::set_num_threads(static_cast<int>(
      o.threads > 0 ? o.threads
                    : std::max(1u, std::thread::hardware_concurrency())));
  if (!cl.child_mode.empty()) {
    return RunChild(o, cl.child_mode, cl.child_arch, cl.child_seq,
                    cl.child_batch, cl.child_bf16, cl.child_profile);
  }
  if (cl.quick) {
    o.archs = {"full", "swa-128", "gdn"};
    o.seq_lens = {1024};
    o.steps = 2;
    o.layer_bench = false;
  }
  for (const std::string& arch : o.archs) BuildConfig(o, arch);  // validate
  if (!o.profile_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.profile_dir, ec);
    if (ec || access(o.profile_dir.c_str(), W_OK) != 0) {
      Fail("--profile: cannot create or write directory '" + o.profile_dir +
           "'" + (ec ? ": " + ec.message() : std::string()));
    }
    if (o.profile_dir.find('\'') != std::string::npos) {
      Fail("--profile: the directory name must not contain a single quote");
    }
  }

  const double peak_fp32 = hlab::bench::MatmulPeakGflops(false);
  const double peak_bf16 = hlab::bench::MatmulPeakGflops(true);
  const bool cpu_bf16 = hlab::bench::CpuHasBf16();
  const std::string exe = SelfExe();
  const std::string reference_script =
      SharedDir() + "/anchors/torch_reference.py";
  const bool have_reference =
      o.reference && access(reference_script.c_str(), R_OK) == 0;
  if (o.reference && !have_reference) {
    std::cerr << "hlab-bench: --reference: " << reference_script
              << " not found; set HLAB_SHARED_DIR. Continuing without it.\n";
  }
  const std::string cpu_name = hlab::bench::CpuDescription();
  Json peak = {{"matmul_peak_gflops_fp32", peak_fp32},
               {"matmul_peak_gflops_bf16", peak_bf16},
               {"cpu_bf16", cpu_bf16},
               {"cpu", cpu_name},
               {"threads", at::get_num_threads()}};
  if (o.json) {
    std::cout << peak.dump() << std::endl;
  } else {
    std::cout << "cpu: " << cpu_name << "\n";
    std::cout << "matmul peak (2048^2, " << at::get_num_threads()
              << " threads): fp32 " << Fmt(peak_fp32, 1) << " GFLOP/s, bf16 "
              << Fmt(peak_bf16, 1) << " GFLOP/s"
              << (cpu_bf16 ? "" : " (no native bf16 on this CPU)") << "\n\n";
    std::printf("%-12s %6s %3s %5s %9s %9s %9s %8s %8s %7s %6s %9s %7s\n",
                "arch", "T", "B", "dtype", "tok/s", "step ms", "CPU ms",
                "RSS MB", "MFLOP/t", "GFLOP/s", "MFU", "ref tok/s", "vs ref");
  }

  std::vector<Row> rows;

  // Every configuration runs once per round; rounds alternate the order
  // (forward, backward, ...) so that a machine slowing or speeding up over
  // the run weighs on every configuration alike. Each row reports the median
  // over the rounds.
  struct Config {
    std::string arch;
    int64_t t = 0, batch = 0;
    bool bf16 = false;
    double flops = 0;
    int64_t n_non_embedding = 0;
    std::vector<Json> results;  // one per round that succeeded
    std::string error;
  };
  std::vector<Config> configs;
  for (int64_t t : o.seq_lens) {
    for (const std::string& arch : o.archs) {
      for (bool bf16 : {false, true}) {
        if (bf16 && std::find(o.bf16_seq_lens.begin(), o.bf16_seq_lens.end(),
                              t) == o.bf16_seq_lens.end()) {
          continue;
        }
        const ModelConfig config = BuildConfig(o, arch);
        configs.push_back({arch,
                           t,
                           std::max<int64_t>(1, o.tokens_per_step / t),
                           bf16,
                           hlab::model::TrainingFlopsPerToken(config, t),
                           hlab::model::CountParameters(config).non_embedding,
                           {},
                           {}});
      }
    }
  }
  for (int64_t round = 0; round < o.rounds; ++round) {
    for (size_t n = 0; n < configs.size(); ++n) {
      Config& c = configs[round % 2 == 0 ? n : configs.size() - 1 - n];
      const std::string dtype = c.bf16 ? "bf16" : "fp32";
      std::string error;
      auto child = RunForJson(
          absl::StrCat(
              exe, " --child-step ", c.arch, " --child-seq-len ", c.t,
              " --child-batch ", c.batch, " --steps ", o.steps,
              c.bf16 ? " --child-bf16" : "", ShapeFlags(o),
              o.profile_dir.empty() || round > 0
                  ? std::string()
                  : absl::StrCat(" --child-profile '", o.profile_dir, "/",
                                 c.arch, "-T", c.t, "-", dtype, ".json'")),
          &error);
      const bool ok = child && child->contains("tokens_per_s");
      if (ok) {
        c.results.push_back(*child);
      } else {
        c.error = child ? child->value("error", "failed") : error;
      }
      // Progress on stderr: the table prints once every round is done.
      std::cerr << "[" << round * configs.size() + n + 1 << "/"
                << o.rounds * configs.size() << "] " << c.arch << " T=" << c.t
                << " " << dtype << ": "
                << (ok ? Fmt((*child)["step_ms"].get<double>()) + " ms"
                       : c.error)
                << std::endl;
    }
  }

  for (const Config& c : configs) {
    const std::string& arch = c.arch;
    const int64_t t = c.t, batch = c.batch;
    const bool bf16 = c.bf16;
    const double flops = c.flops;
    Row row;
    row.j = {{"arch", arch},
             {"d_model", o.d_model},
             {"layers", o.layers},
             {"seq_len", t},
             {"batch", batch},
             {"dtype", bf16 ? "bf16" : "fp32"},
             {"n_non_embedding", c.n_non_embedding},
             {"flops_per_token", flops}};
    std::string error;
    if (!c.results.empty()) {
      row.ok = true;
      for (auto& [k, v] : c.results.front().items()) row.j[k] = v;
      std::vector<double> step, cpu, rss, forward, backward, update;
      for (const Json& r : c.results) {
        step.push_back(r["step_ms"].get<double>());
        cpu.push_back(r["step_cpu_ms"].get<double>());
        rss.push_back(r["peak_rss_mb"].get<double>());
        forward.push_back(r.value("forward_ms", 0.0));
        backward.push_back(r.value("backward_ms", 0.0));
        update.push_back(r.value("update_ms", 0.0));
      }
      row.j["forward_ms"] = MedianOf(forward);
      row.j["backward_ms"] = MedianOf(backward);
      row.j["update_ms"] = MedianOf(update);
      row.j["step_ms"] = MedianOf(step);
      row.j["step_cpu_ms"] = MedianOf(cpu);
      row.j["peak_rss_mb"] = *std::max_element(rss.begin(), rss.end());
      row.j["tokens_per_s"] =
          static_cast<double>(batch * t) / (MedianOf(step) / 1000.0);
      if (o.rounds > 1) row.j["step_ms_rounds"] = step;
      const double tps = row.j["tokens_per_s"].get<double>();
      row.j["mfu"] = flops * tps / ((bf16 ? peak_bf16 : peak_fp32) * 1e9);
    } else {
      row.j["error"] = c.error;
    }
    // The reference knows full, swa-<w>, gdn and mamba2 (no lightning).
    const bool ref_arch =
        arch == "full" || arch == "gdn" || arch == "mamba2" ||
        (arch.rfind("swa-", 0) == 0 && arch.find('-', 4) == std::string::npos);
    if (have_reference && ref_arch && t <= o.reference_max_seq_len) {
      auto ref = RunForJson(
          absl::StrCat(ReferencePython(), " ", reference_script, " --arch ",
                       arch, " --d-model ", o.d_model, " --layers ", o.layers,
                       " --heads ", o.heads, " --kv-heads ", o.kv_heads,
                       " --vocab ", o.vocab, " --seq-len ", t, " --batch ",
                       batch, " --steps ", o.steps, " --threads ",
                       o.threads > 0 ? o.threads : at::get_num_threads(),
                       bf16 ? " --bf16" : ""),
          &error);
      if (ref && ref->contains("tokens_per_s")) {
        row.j["reference_tokens_per_s"] = (*ref)["tokens_per_s"];
        if (row.ok) {
          row.j["speedup_vs_reference"] = row.j["tokens_per_s"].get<double>() /
                                          (*ref)["tokens_per_s"].get<double>();
        }
      } else {
        row.j["reference_error"] = error;
      }
    }
    rows.push_back(row);
    if (o.json) {
      std::cout << row.j.dump() << std::endl;
    } else if (!row.ok) {
      std::printf("%-12s %6lld %3lld %5s  %s\n", arch.c_str(),
                  static_cast<long long>(t), static_cast<long long>(batch),
                  bf16 ? "bf16" : "fp32",
                  row.j["error"].get<std::string>().c_str());
    } else {
      const double tps = row.j["tokens_per_s"].get<double>();
      std::printf(
          "%-12s %6lld %3lld %5s %9.0f %9.0f %9.0f %8.0f %8.1f %7.1f "
          "%5.1f%% %9s %7s\n",
          arch.c_str(), static_cast<long long>(t),
          static_cast<long long>(batch), bf16 ? "bf16" : "fp32", tps,
          row.j["step_ms"].get<double>(), row.j["step_cpu_ms"].get<double>(),
          row.j["peak_rss_mb"].get<double>(), flops / 1e6, flops * tps / 1e9,
          100 * row.j["mfu"].get<double>(),
          row.j.contains("reference_tokens_per_s")
              ? Fmt(row.j["reference_tokens_per_s"].get<double>()).c_str()
              : "-",
          row.j.contains("speedup_vs_reference")
              ? (Fmt(row.j["speedup_vs_reference"].get<double>(), 2) + "x")
                    .c_str()
              : "-");
    }
    std::fflush(stdout);
  }

  // The SWA layer alone: time and memory per token must not grow with T.
  std::vector<Json> layer_rows;
  if (o.layer_bench) {
    for (int64_t t : {2048, 16384}) {
      std::string error;
      auto child = RunForJson(
          absl::StrCat(exe, " --child-layer swa:128 --child-seq-len ", t,
                       " --child-batch 1 --steps ",
                       std::max<int64_t>(o.steps, 4), ShapeFlags(o)),
          &error);
      Json j = {{"layer", "swa:128"}, {"seq_len", t}};
      if (child && child->contains("step_ms")) {
        j["us_per_token"] = (*child)["step_ms"].get<double>() * 1000.0 / t;
        j["kb_per_token"] = ((*child)["peak_rss_mb"].get<double>() -
                             (*child)["baseline_rss_mb"].get<double>()) *
                            1024.0 / t;
      } else {
        j["error"] = error;
      }
      layer_rows.push_back(j);
      if (o.json) std::cout << j.dump() << std::endl;
    }
  }

  const std::vector<Json> targets =
      EvaluateTargets(o, cl.micro, cpu_bf16, rows, layer_rows);
  if (o.json) {
    for (const Json& t : targets) std::cout << t.dump() << std::endl;
  } else {
    if (!layer_rows.empty()) {
      std::cout << "\nSWA-128 layer alone (B=1, fwd+bwd):\n";
      for (const Json& j : layer_rows) {
        if (j.contains("error")) {
          std::cout << "  T=" << j["seq_len"] << ": " << j["error"] << "\n";
        } else {
          std::cout << "  T=" << j["seq_len"] << ": "
                    << Fmt(j["us_per_token"].get<double>(), 1) << " us/token, "
                    << Fmt(j["kb_per_token"].get<double>(), 1) << " KB/token\n";
        }
      }
    }
    std::cout << "\ntargets:\n";
    for (const Json& t : targets) {
      std::cout << "  " << (t["pass"].get<bool>() ? "PASS " : "MISS ")
                << t["target"].get<std::string>() << ": "
                << t["detail"].get<std::string>() << "\n";
    }
  }
  return 0;
}
