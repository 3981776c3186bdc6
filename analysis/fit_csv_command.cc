#include "analysis/fit_csv_command.h"

#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/analyze.h"
#include "analysis/points_csv.h"
#include "analysis/verify.h"

namespace hlab::analysis {
namespace {

absl::Status FlagError(const std::string& flag, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

absl::StatusOr<int> ParseInt(const std::string& flag, const std::string& text,
                             int min_value) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min_value) {
    return FlagError(flag, absl::StrCat("expected an integer >= ", min_value,
                                        ", got '", text, "'"));
  }
  return value;
}

bool IsInputError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kOutOfRange;
}

absl::StatusOr<std::vector<ScalingPoint>> ReadPoints(
    const std::string& path, const std::string& preprocess) {
  if (preprocess == "chinchilla") return ReadChinchillaCsv(path);
  return ReadPointsCsv(path);
}

}  // namespace

absl::StatusOr<FitCommandArgs> ParseFitArgs(
    const std::vector<std::string>& args) {
  FitCommandArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (const size_t eq = flag.find('=');
        flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value.has_value()) return *inline_value;
      if (i + 1 >= args.size()) return FlagError(flag, "needs a value");
      return args[++i];
    };
    auto take = [&](std::string* dst) -> absl::Status {
      auto v = value();
      if (!v.ok()) return v.status();
      *dst = *std::move(v);
      return absl::OkStatus();
    };
    std::string text;
    absl::Status status;
    if (flag == "--help" || flag == "-h") {
      out.help = true;
    } else if (flag == "--json") {
      out.json = true;
    } else if (flag == "--points") {
      status = take(&out.points_path);
    } else if (flag == "--chinchilla") {
      status = take(&out.points_path);
      out.preprocess = "chinchilla";
    } else if (flag == "--preprocess") {
      status = take(&out.preprocess);
      if (status.ok() && out.preprocess != "none" &&
          out.preprocess != "chinchilla") {
        status = FlagError(flag, absl::StrCat("expected 'none' or "
                                              "'chinchilla', got '",
                                              out.preprocess, "'"));
      }
    } else if (flag == "--verify") {
      status = take(&out.verify_path);
    } else if (flag == "--verify-n-above") {
      status = take(&text);
      double n = 0;
      if (status.ok() &&
          (!absl::SimpleAtod(text, &n) || !std::isfinite(n) || n <= 0)) {
        status = FlagError(flag, absl::StrCat("expected a positive number, "
                                              "got '",
                                              text, "'"));
      }
      out.verify_n_above = n;
    } else if (flag == "--bootstrap" || flag == "--threads") {
      status = take(&text);
      if (status.ok()) {
        auto n = ParseInt(flag, text, 0);
        if (!n.ok()) return n.status();
        (flag == "--bootstrap" ? out.bootstrap : out.threads) = *n;
      }
    } else if (flag == "--seed") {
      status = take(&text);
      if (status.ok() && !absl::SimpleAtoi(text, &out.seed)) {
        status = FlagError(flag, absl::StrCat("expected a non-negative "
                                              "integer, got '",
                                              text, "'"));
      }
    } else {
      status = absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", args[i], "'"));
    }
    if (!status.ok()) return status;
  }
  if (out.help) return out;
  if (out.points_path.empty()) {
    return absl::InvalidArgumentError(
        "missing --points FILE.csv (or --chinchilla FILE.csv)");
  }
  if (!out.verify_path.empty() && out.verify_n_above.has_value()) {
    return absl::InvalidArgumentError(
        "give either --verify or --verify-n-above, not both");
  }
  return out;
}

std::string FitUsage(const std::string& program) {
  return absl::StrCat(
      "usage: ", program,
      " --points FILE.csv [--verify FILE.csv | --verify-n-above N]\n"
      "       [--bootstrap K] [--threads T] [--seed S] [--json]\n"
      "       ",
      program,
      " --chinchilla FILE.csv ...\n\n"
      "Fits L(N, D) = E + A/N^alpha + B/D^beta (Chinchilla approach 3: "
      "summed Huber\n"
      "loss on log predictions, L-BFGS from 4500 starts) with a "
      "variable-projection\n"
      "cross-check, profile-likelihood confidence intervals for the\n"
      "coefficients and the held-out predictions (their coverage is "
      "measured:\n"
      "docs/analysis.md), and bootstrap percentile intervals beside them.\n\n"
      "  --points FILE       CSV with a header naming columns N, D, loss\n"
      "  --chinchilla FILE   Chinchilla Fig. 4 points (Model Size, Training "
      "FLOP,\n"
      "                      loss): D = FLOP/(6N), 5 highest losses dropped\n"
      "  --preprocess P      none (default) or chinchilla, for --points\n"
      "  --verify FILE       held-out points (same format as --points)\n"
      "  --verify-n-above N  hold out the points with N above this\n"
      "  --bootstrap K       bootstrap resamples (default 1000; 0 = none; "
      "the\n"
      "                      profile-likelihood intervals are always "
      "computed)\n"
      "  --threads T         threads (default 0 = all cores); results do "
      "not depend on it\n"
      "  --seed S            bootstrap seed (default 42)\n"
      "  --json              print one JSON object instead of text\n");
}

int RunFitCommand(const std::vector<std::string>& args, std::ostream& out,
                  std::ostream& err, const std::string& program) {
  auto fail = [&](const absl::Status& status) {
    err << program << ": " << status.message();
    if (IsInputError(status)) {
      err << " (run '" << program << " --help' for usage)\n";
      return 2;
    }
    err << "\n";
    return 1;
  };
  auto parsed = ParseFitArgs(args);
  if (!parsed.ok()) return fail(parsed.status());
  const FitCommandArgs& a = *parsed;
  if (a.help) {
    out << FitUsage(program);
    return 0;
  }
  auto points = ReadPoints(a.points_path, a.preprocess);
  if (!points.ok()) return fail(points.status());
  std::vector<ScalingPoint> fit_points = *std::move(points);
  std::vector<ScalingPoint> verify_points;
  if (!a.verify_path.empty()) {
    auto verify = ReadPoints(a.verify_path, a.preprocess);
    if (!verify.ok()) return fail(verify.status());
    verify_points = *std::move(verify);
  } else if (a.verify_n_above.has_value()) {
    PointSplit split = SplitByN(fit_points, *a.verify_n_above);
    if (split.verify.empty()) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("--verify-n-above ", *a.verify_n_above,
                       ": no point has a larger N, so nothing is held out")));
    }
    fit_points = std::move(split.fit);
    verify_points = std::move(split.verify);
  }

  AnalysisOptions options;
  options.fit.threads = a.threads;
  options.bootstrap.threads = a.threads;
  options.bootstrap.resamples = a.bootstrap;
  options.bootstrap.seed = a.seed;
  auto report = AnalyzePowerLaw(fit_points, verify_points, options);
  if (!report.ok()) return fail(report.status());
  if (a.json) {
    out << PowerLawReportToJson(*report) << "\n";
  } else {
    out << FormatPowerLawReport(*report);
  }
  return 0;
}

}  // namespace hlab::analysis
