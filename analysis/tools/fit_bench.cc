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
//
//   build/bin/hlab-bench-fit [--points chinchilla.csv] [--no-scipy]
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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/bootstrap.h"
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

}  // namespace

int main(int argc, char** argv) {
  std::string path = DefaultPointsPath();
  bool run_scipy = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--points" && i + 1 < argc) {
      path = argv[++i];
    } else if (arg == "--no-scipy") {
      run_scipy = false;
    } else {
      std::cerr << "usage: " << argv[0]
                << " [--points chinchilla.csv] [--no-scipy]\n";
      return 2;
    }
  }
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
  return 0;
}
