// hlab-bench-fit: times the Chinchilla approach-3 fit against SciPy.
//
// On the 240 Chinchilla Figure 4 points (Epoch's preprocessing), measures
//   1. FitPowerLaw, 4500 L-BFGS starts, with 1 and with 2 threads;
//   2. a 1000-resample bootstrap (1 and 2 threads);
//   3. the same 4500-start fit in SciPy (scipy.optimize.minimize, L-BFGS-B,
//      analytic gradient, SciPy's default tolerances as in the replication),
//      from a Python script written to a temp directory and run with python3
//      in the same process run, on the same points;
// and prints the times, the speed-up ratios and both sets of coefficients.
// Then it measures interval coverage (analysis/coverage.h): on synthetic
// datasets from issue #24's law (E=1, A=30, alpha=0.35, B=60, beta=0.3) at
// four grid shapes (3 scales x 3, 4 and 5 budgets, the demo's and
// paper-mini's fit grids, and 4 x 5), plus Chinchilla's law on a 3 x 4 grid
// at Chinchilla's scale, and each noise level, how often each
// coefficient's and each held-out prediction's 95% profile-likelihood interval
// covers the truth; --compare-bootstrap K measures the percentile bootstrap (K
// resamples, 4500-start fit) on the same datasets.
//
//   build/bin/hlab-bench-fit [--points chinchilla.csv] [--no-scipy]
//                            [--coverage-only | --no-coverage]
//                            [--datasets K] [--noise 0.005,0.01,0.02]
//                            [--compare-bootstrap K] [--threads T]
//
// The points file defaults to $HLAB_SHARED_DIR (or <repo>/../shared) +
// /data/scaling_law/chinchilla_fig4_points.csv. The Python interpreter is
// $HLAB_PYTHON, else the first of python3, /usr/bin/python3 that imports
// scipy.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analysis/bootstrap.h"
#include "analysis/coverage.h"
#include "analysis/fit.h"
#include "analysis/points_csv.h"
#include "analysis/varpro.h"

namespace {

using hlab::analysis::ScalingPoint;

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// CPU seconds used by this process (all threads): robust to other load on
// the machine, unlike wall time.
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// The SciPy side: the replication's procedure, timed around the start loop.
constexpr char kScipyScript[] = R"PY(
import json, sys, time
import numpy as np
from scipy.optimize import minimize

data = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
ln_n, ln_d, ln_l = np.log(data[:, 0]), np.log(data[:, 1]), np.log(data[:, 2])
delta = 1e-3

def objective(p):
    a, b, e, alpha, beta = p
    t = np.stack([a - alpha * ln_n, b - beta * ln_d, np.full_like(ln_n, e)])
    m = t.max(axis=0)
    w = np.exp(t - m)
    s = w.sum(axis=0)
    r = m + np.log(s) - ln_l
    w /= s
    ar = np.abs(r)
    f = np.where(ar <= delta, 0.5 * r * r, delta * (ar - 0.5 * delta)).sum()
    psi = np.clip(r, -delta, delta)
    g = np.array([(psi * w[0]).sum(), (psi * w[1]).sum(), (psi * w[2]).sum(),
                  -(psi * w[0] * ln_n).sum(), -(psi * w[1] * ln_d).sum()])
    return f, g

starts = [(a, b, e, alpha, beta)
          for alpha in np.arange(0, 2.5, 0.5) for beta in np.arange(0, 2.5, 0.5)
          for e in np.arange(-1, 1.5, 0.5) for a in np.arange(0, 30, 5)
          for b in np.arange(0, 30, 5)]
t0, c0 = time.perf_counter(), time.process_time()
best = None
for x0 in starts:
    res = minimize(objective, np.array(x0, dtype=float), jac=True,
                   method="L-BFGS-B")
    if best is None or res.fun < best.fun:
        best = res
seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
a, b, e, alpha, beta = best.x
f, g = objective(best.x)
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds,
                  "starts": len(starts),
                  "objective": float(f), "gradient_norm": float(np.linalg.norm(g)),
                  "E": float(np.exp(e)), "A": float(np.exp(a)), "alpha": float(alpha),
                  "B": float(np.exp(b)), "beta": float(beta)}))
)PY";

std::string DefaultPointsPath() {
  const char* shared = std::getenv("HLAB_SHARED_DIR");
  const std::string dir =
      shared != nullptr ? shared : std::string(HLAB_SOURCE_DIR) + "/../shared";
  return dir + "/data/scaling_law/chinchilla_fig4_points.csv";
}

std::string RunCommand(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return output;
  }
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    output.append(buffer, n);
  }
  *status = pclose(pipe);
  return output;
}

std::string FindPython() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("HLAB_PYTHON")) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const std::string& python : candidates) {
    int status = 0;
    RunCommand(python + " -c 'import scipy' 2>/dev/null", &status);
    if (status == 0) return python;
  }
  return "";
}

void PrintLaw(const char* label, double e, double a, double alpha, double b,
              double beta) {
  std::cout << absl::StrFormat(
      "  %-22s E=%.6f A=%.4f alpha=%.6f B=%.4f beta=%.6f\n", label, e, a, alpha,
      b, beta);
}

struct CoverageArgs {
  bool run = true;
  bool only = false;
  int datasets = 100;
  std::vector<double> noise = {0.005, 0.01, 0.02};
  int bootstrap = 0;
  int threads = 2;
};

// A grid and the law its datasets are drawn from.
struct CoverageCase {
  hlab::analysis::GridShape shape;
  hlab::analysis::PowerLaw truth = hlab::analysis::CoverageOptions().truth;
};

// The demo's scales S1-S4 (N 12.8K-114K: d_model 24, 32, 48, 72) and the
// paper-mini budgets; the fits use S1-S3 and predict S4, as both specs do.
// Last, a check that nothing is tuned to one law: Chinchilla's law at
// Chinchilla's scale, 3 x 4.
std::vector<CoverageCase> CoverageCases() {
  const std::vector<double> n = {12.8e3, 22.8e3, 51.2e3};
  const double n_heldout = 114e3;
  auto shape = [&](const char* name, std::vector<double> d) {
    const double d_max = d.back();
    return hlab::analysis::GridShape{
        name, n, std::move(d), {{n_heldout, d_max}, {n_heldout, 4 * d_max}}};
  };
  hlab::analysis::GridShape four = shape(
      "4x5 (all four scales)", {262144, 524288, 1048576, 2097152, 4194304});
  four.n.push_back(n_heldout);
  for (auto& site : four.predict_at) site.n = 256.5e3;  // d_model 108
  const hlab::analysis::GridShape chinchilla = {"3x4 Chinchilla law*",
                                                {1e7, 3e7, 1e8},
                                                {2e8, 5e8, 1e9, 2e9},
                                                {{3e8, 2e9}, {3e8, 8e9}}};
  return {
      {shape("3x3 (demo)", {262144, 786432, 2097152})},
      {shape("3x4 (issue)", {262144, 524288, 1048576, 2097152})},
      {shape("3x5 (paper-mini)", {262144, 524288, 1048576, 2097152, 4194304})},
      {four},
      {chinchilla, {1.69, 406.4, 0.34, 410.7, 0.28}}};
}

std::string Cell(const hlab::analysis::CoverageCount& c) {
  return absl::StrFormat("%5.1f%%", 100 * c.Rate());
}

void PrintCoverageRow(const std::string& label,
                      const hlab::analysis::MethodCoverage& m) {
  std::cout << absl::StrFormat("  %-36s %s %s %s %s %s", label, Cell(m.E),
                               Cell(m.A), Cell(m.alpha), Cell(m.B),
                               Cell(m.beta));
  for (const auto& p : m.predictions) std::cout << " " << Cell(p) << "   ";
  int unbounded = 0, total = 0;
  for (const auto* c : {&m.E, &m.A, &m.alpha, &m.B, &m.beta}) {
    unbounded += c->unbounded;
    total += c->total;
  }
  std::cout << absl::StrFormat("  open: alpha %d, A %d, E %d of %d",
                               m.alpha.unbounded, m.A.unbounded, m.E.unbounded,
                               m.alpha.total);
  if (m.failed > 0) std::cout << absl::StrFormat(" (%d failed)", m.failed);
  std::cout << "\n";
}

// Returns false when a figure of the profile intervals is below 90%.
bool RunCoverage(const CoverageArgs& args) {
  const hlab::analysis::CoverageOptions defaults;
  const hlab::analysis::PowerLaw& t = defaults.truth;
  std::cout << absl::StrFormat(
      "\nInterval coverage: %d synthetic datasets per row from E=%g A=%g "
      "alpha=%g B=%g beta=%g (but *),\nlog-normal noise, seeded (seed %d); "
      "nominal "
      "95%% intervals. pred = the loss at the next, held-out\nscale (N=114K; "
      "256K for 4x5) with the largest fitted budget; pred,4xD = at 4x that "
      "budget.\n* Chinchilla's law E=1.69 A=406.4 alpha=0.34 B=410.7 "
      "beta=0.28 at N 1e7-1e8, D 2e8-2e9, predicting N=3e8.\n",
      args.datasets, t.E, t.A, t.alpha, t.B, t.beta,
      static_cast<int>(defaults.seed));
  std::cout << absl::StrFormat("  %-36s %6s %6s %6s %6s %6s %-9s %-9s\n",
                               "grid, noise, method", "E", "A", "alpha", "B",
                               "beta", "pred", "pred,4xD");
  bool all_met = true;
  double worst = 1;
  for (double noise : args.noise) {
    for (const CoverageCase& coverage_case : CoverageCases()) {
      const hlab::analysis::GridShape& shape = coverage_case.shape;
      hlab::analysis::CoverageOptions options;
      options.truth = coverage_case.truth;
      options.noise_sigma = noise;
      options.datasets = args.datasets;
      options.bootstrap_resamples = args.bootstrap;
      options.threads = args.threads;
      const auto start = std::chrono::steady_clock::now();
      auto result = hlab::analysis::MeasureIntervalCoverage(shape, options);
      const double seconds = Seconds(start);
      if (!result.ok()) {
        std::cerr << "hlab-bench-fit: " << result.status() << "\n";
        return false;
      }
      const std::string where =
          absl::StrFormat("%s, %g%%", shape.name, 100 * noise);
      PrintCoverageRow(where + ", profile", result->profile);
      if (result->bootstrap.has_value()) {
        PrintCoverageRow(where + ", bootstrap", *result->bootstrap);
      }
      const auto& m = result->profile;
      for (const auto* c : {&m.E, &m.A, &m.alpha, &m.B, &m.beta}) {
        worst = std::min(worst, c->Rate());
      }
      for (const auto& p : m.predictions) worst = std::min(worst, p.Rate());
      std::cout << absl::StrFormat(
          "  %-36s profile %.3f s CPU per dataset%s; %.1f s wall\n", "",
          result->seconds_profile / args.datasets,
          result->bootstrap.has_value()
              ? absl::StrFormat(", bootstrap %.3f s",
                                result->seconds_bootstrap / args.datasets)
              : std::string(),
          seconds);
    }
  }
  all_met = worst >= 0.9;
  std::cout << absl::StrFormat(
      "Lowest profile coverage: %.1f%% (target >= 90%%): %s\n", 100 * worst,
      all_met ? "met" : "NOT met");
  return all_met;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = DefaultPointsPath();
  bool run_scipy = true;
  CoverageArgs coverage;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    int value = 0;
    if (arg == "--points" && has_value) {
      path = argv[++i];
    } else if (arg == "--no-scipy") {
      run_scipy = false;
    } else if (arg == "--no-coverage") {
      coverage.run = false;
    } else if (arg == "--coverage-only") {
      coverage.only = true;
    } else if ((arg == "--datasets" || arg == "--compare-bootstrap" ||
                arg == "--threads") &&
               has_value && absl::SimpleAtoi(argv[i + 1], &value) &&
               value >= (arg == "--compare-bootstrap" ? 0 : 1)) {
      ++i;
      (arg == "--datasets"  ? coverage.datasets
       : arg == "--threads" ? coverage.threads
                            : coverage.bootstrap) = value;
    } else if (arg == "--noise" && has_value) {
      coverage.noise.clear();
      for (absl::string_view part : absl::StrSplit(argv[++i], ',')) {
        double sigma = 0;
        if (!absl::SimpleAtod(part, &sigma) || !(sigma >= 0)) {
          std::cerr << "hlab-bench-fit: --noise takes relative levels, e.g. "
                       "0.01,0.02\n";
          return 2;
        }
        coverage.noise.push_back(sigma);
      }
    } else {
      std::cerr << "usage: " << argv[0]
                << " [--points chinchilla.csv] [--no-scipy] [--coverage-only "
                   "| --no-coverage] [--datasets K] [--noise 0.005,0.01,0.02] "
                   "[--compare-bootstrap K] [--threads T]\n";
      return 2;
    }
  }
  if (coverage.only) return RunCoverage(coverage) ? 0 : 1;
  auto points = hlab::analysis::ReadChinchillaCsv(path);
  if (!points.ok()) {
    std::cerr << "hlab-bench-fit: " << points.status().message()
              << " (set HLAB_SHARED_DIR or pass --points)\n";
    return 2;
  }
  std::cout << "hlab-bench-fit: " << points->size()
            << " Chinchilla points from " << path << "\n";

  // Ours: the 4500-start fit with 1 and 2 threads.
  hlab::analysis::FitOptions fit_options;
  double fit_seconds[3] = {0, 0, 0}, fit_cpu_seconds[3] = {0, 0, 0};
  hlab::analysis::FitResult fit;
  for (int threads : {1, 2}) {
    fit_options.threads = threads;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds();
    auto result = hlab::analysis::FitPowerLaw(*points, fit_options);
    fit_seconds[threads] = Seconds(start);
    fit_cpu_seconds[threads] = CpuSeconds() - cpu_start;
    if (!result.ok()) {
      std::cerr << "hlab-bench-fit: " << result.status() << "\n";
      return 1;
    }
    fit = *result;
    std::cout << absl::StrFormat(
        "fit (4500 starts, Ceres L-BFGS), %d thread(s): %8.3f s wall, "
        "%.3f s CPU  [objective %.12g, gradient norm %.2g]\n",
        threads, fit_seconds[threads], fit_cpu_seconds[threads], fit.objective,
        fit.gradient_norm);
  }

  // Ours: the 1000-resample bootstrap.
  for (int threads : {1, 2}) {
    hlab::analysis::BootstrapOptions boot;
    boot.threads = threads;
    const auto start = std::chrono::steady_clock::now();
    auto ci =
        hlab::analysis::BootstrapPowerLaw(*points, fit, fit_options, boot);
    const double seconds = Seconds(start);
    if (!ci.ok()) {
      std::cerr << "hlab-bench-fit: " << ci.status() << "\n";
      return 1;
    }
    std::cout << absl::StrFormat(
        "bootstrap (1000 resamples), %d thread(s):     %8.3f s  "
        "[alpha 95%% CI %.4f..%.4f, beta %.4f..%.4f]\n",
        threads, seconds, ci->alpha.lower, ci->alpha.upper, ci->beta.lower,
        ci->beta.upper);
  }

  // VarPro, for the coefficient comparison.
  const auto vp_start = std::chrono::steady_clock::now();
  auto varpro = hlab::analysis::FitPowerLawVarPro(*points);
  const double vp_seconds = Seconds(vp_start);
  if (!varpro.ok()) {
    std::cerr << "hlab-bench-fit: " << varpro.status() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
      "VarPro cross-check:                      "
      "%8.3f s\n",
      vp_seconds);

  double scipy_seconds = 0;
  std::string scipy_line;
  if (run_scipy) {
    const std::string python = FindPython();
    char dir_template[] = "/tmp/hlab-bench-fit-XXXXXX";
    if (python.empty() || mkdtemp(dir_template) == nullptr) {
      std::cout << "SciPy: skipped (no python3 with scipy; set HLAB_PYTHON)\n";
    } else {
      const std::string dir = dir_template;
      const std::string script = dir + "/fit_scipy.py";
      const std::string data = dir + "/points.csv";
      std::ofstream(script) << kScipyScript;
      {
        std::ofstream csv(data);
        csv << "N,D,loss\n";
        for (const ScalingPoint& p : *points) {
          csv << absl::StrFormat("%.17g,%.17g,%.17g\n", p.n, p.d, p.loss);
        }
      }
      std::cout << "SciPy (" << python
                << ", L-BFGS-B, 4500 starts): running...\n"
                << std::flush;
      int status = 0;
      scipy_line = RunCommand(python + " " + script + " " + data, &status);
      unlink(script.c_str());
      unlink(data.c_str());
      rmdir(dir.c_str());
      if (status != 0) {
        std::cout << "SciPy: failed (exit status " << status << ")\n";
        scipy_line.clear();
      }
    }
  }

  std::cout << "\nCoefficients:\n";
  PrintLaw("ours (L-BFGS):", fit.law.E, fit.law.A, fit.law.alpha, fit.law.B,
           fit.law.beta);
  PrintLaw("ours (VarPro):", varpro->law.E, varpro->law.A, varpro->law.alpha,
           varpro->law.B, varpro->law.beta);
  if (!scipy_line.empty()) {
    // The script prints one flat JSON object of numbers.
    auto number = [&](const std::string& key) {
      const std::string needle = "\"" + key + "\": ";
      const size_t at = scipy_line.find(needle);
      return at == std::string::npos
                 ? 0.0
                 : std::strtod(scipy_line.c_str() + at + needle.size(),
                               nullptr);
    };
    scipy_seconds = number("seconds");
    const double scipy_cpu_seconds = number("cpu_seconds");
    PrintLaw("SciPy (L-BFGS-B):", number("E"), number("A"), number("alpha"),
             number("B"), number("beta"));
    std::cout << absl::StrFormat(
        "  SciPy objective %.12g, gradient norm %.2g\n", number("objective"),
        number("gradient_norm"));
    std::cout << absl::StrFormat(
        "\nFit time (wall): SciPy %.3f s; ours %.3f s (1 thread), %.3f s "
        "(2 threads)\n",
        scipy_seconds, fit_seconds[1], fit_seconds[2]);
    std::cout << absl::StrFormat(
        "Speed-up over SciPy (wall): %.1fx with 1 thread, %.1fx with 2 "
        "threads <- headline: 2 threads, the machine's 2 cores (SciPy runs "
        "on one)\n",
        scipy_seconds / fit_seconds[1], scipy_seconds / fit_seconds[2]);
    std::cout << absl::StrFormat(
        "Per-core speed-up (CPU time, insensitive to other load): SciPy "
        "%.3f s vs ours %.3f s = %.1fx\n",
        scipy_cpu_seconds, fit_cpu_seconds[1],
        scipy_cpu_seconds / fit_cpu_seconds[1]);
  }
  if (coverage.run && !RunCoverage(coverage)) return 1;
  return 0;
}
