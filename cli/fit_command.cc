// `hlab fit`: the offline power-law fitter of hlab-fit (analysis/
// fit_command.h) with the same flags and output, and `--sweep S`, which
// takes the points (N, D, final loss) of a sweep's succeeded runs from the
// coordinator and fits one law per architecture, and `--db FILE`, which
// fits a sweep's runs offline from a database file opened read-only, as the
// coordinator's automatic fits do (fits/sweep_fits.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/analyze.h"
#include "analysis/fit_csv_command.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"
#include "coordinator/store/query.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"
#include "fits/sweep_fits.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "fit";

// The spec's fit targets (docs/sweeps.md, fit.targets): "loss" is the
// final validation loss, "longppl" the final log LongPPL; "train_loss" the
// final training loss. "val_loss" and "log_longppl" are accepted too.
bool KnownTarget(const std::string& target) {
  return target == "loss" || target == "val_loss" || target == "longppl" ||
         target == "log_longppl" || target == "train_loss";
}

// One run's value of the fitted target, if known.
bool TargetValue(const v1::Run& run, const std::string& target, double* v) {
  if ((target == "loss" || target == "val_loss") && run.has_final_val_loss()) {
    *v = run.final_val_loss();
  } else if ((target == "longppl" || target == "log_longppl") &&
             run.has_final_log_longppl()) {
    *v = run.final_log_longppl();
  } else if (target == "train_loss" && run.has_final_loss()) {
    *v = run.final_loss();
  } else {
    return false;
  }
  return true;
}

// A temporary points CSV, removed when it goes out of scope.
class TempPoints {
 public:
  explicit TempPoints(const std::string& csv) {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(dir != nullptr ? dir : "/tmp", "/hlab-fit-points-XXXXXX");
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    const int fd = mkstemp(name.data());
    if (fd < 0) return;
    close(fd);
    path_ = name.data();
    std::ofstream(path_) << csv;
  }
  ~TempPoints() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  TempPoints(const TempPoints&) = delete;
  TempPoints& operator=(const TempPoints&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int FitSweepRemote(const std::vector<std::string>& argv, std::ostream& out,
                   std::ostream& err) {
  // Our flags and the connection flags; everything else goes to the fitter.
  std::vector<FlagDef> ours =
      WithConnectionFlags({{"sweep", true}, {"arch", true}, {"target", true}});
  std::vector<std::string> own_args;
  std::vector<std::string> fit_args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const std::string name =
        a.rfind("--", 0) == 0 ? a.substr(2, a.find('=') - 2) : std::string();
    bool mine = false;
    for (const FlagDef& f : ours)
      mine = mine || (!name.empty() && f.name == name);
    std::vector<std::string>& to = mine ? own_args : fit_args;
    to.push_back(a);
    if (mine && a.find('=') == std::string::npos && i + 1 < argv.size()) {
      to.push_back(argv[++i]);
    }
  }
  for (const std::string& a : fit_args) {
    if (a == "--points" || a == "--chinchilla" || a == "--verify") {
      return UsageError(err, kName,
                        "--sweep takes its points from the "
                        "coordinator; drop " +
                            a);
    }
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(own_args, ours);
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  const std::string target = args->Get("target", "loss");
  if (!KnownTarget(target)) {
    return UsageError(err, kName,
                      "--target must be loss (validation), longppl or "
                      "train_loss, got '" +
                          target + "'");
  }
  const bool json =
      std::find(fit_args.begin(), fit_args.end(), "--json") != fit_args.end();
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  v1::ListRunsRequest request;
  request.set_sweep(args->Get("sweep"));
  request.set_architecture(args->Get("arch"));
  request.add_states(v1::RUN_STATE_SUCCEEDED);
  std::vector<v1::Run> runs;
  grpc::Status s = ListAllRuns(**client, request, &runs);
  if (!s.ok()) {
    return Failure(err, kName, (*client)->ErrorMessage(s, "read runs"));
  }
  // One points CSV per architecture, in the order they first appear.
  std::vector<std::string> archs;
  std::map<std::string, std::string> csv;
  std::map<std::string, int> count;
  for (const v1::Run& run : runs) {
    double value = 0;
    if (!TargetValue(run, target, &value)) continue;
    if (csv.count(run.architecture()) == 0) {
      archs.push_back(run.architecture());
      csv[run.architecture()] = "N,D,loss\n";
    }
    absl::StrAppend(&csv[run.architecture()], run.non_embedding_params(), ",",
                    run.tokens(), ",", ExactDouble(value), "\n");
    ++count[run.architecture()];
  }
  if (archs.empty()) {
    return Failure(
        err, kName,
        absl::StrCat("sweep ", args->Get("sweep"),
                     " has no succeeded runs with ", target,
                     "; see `hlab status ", args->Get("sweep"), "`"));
  }
  int code = kExitOk;
  nlohmann::ordered_json all = nlohmann::ordered_json::object();
  for (const std::string& arch : archs) {
    TempPoints points(csv[arch]);
    if (points.path().empty()) {
      return Failure(err, kName,
                     "cannot write a temporary points file; set "
                     "TMPDIR to a writable directory");
    }
    std::vector<std::string> run_args = fit_args;
    run_args.push_back("--points");
    run_args.push_back(points.path());
    std::ostringstream report;
    std::ostringstream report_err;
    const int arch_code =
        hlab::analysis::RunFitCommand(run_args, report, report_err, "hlab fit");
    if (arch_code != kExitOk) {
      err << "hlab fit: error: architecture " << arch << " (" << count[arch]
          << " runs): " << report_err.str();
      code = std::max(code, arch_code);
      continue;
    }
    if (json) {
      all[arch] = nlohmann::ordered_json::parse(report.str());
    } else {
      out << "architecture " << arch << ": " << count[arch]
          << " succeeded runs, target " << target << "\n"
          << report.str() << "\n";
    }
  }
  if (json) out << all.dump(2) << "\n";
  return code;
}

int FitDatabase(const std::vector<std::string>& argv, std::ostream& out,
                std::ostream& err) {
  const std::vector<FlagDef> flags = {
      {"db", true},        {"sweep", true},   {"arch", true}, {"target", true},
      {"bootstrap", true}, {"threads", true}, {"seed", true}, {"json", false}};
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, flags);
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  const std::string target = args->Get("target", "");
  if (!target.empty() && target != "loss" && target != "longppl") {
    return UsageError(
        err, kName,
        "--target must be loss or longppl with --db, got '" + target + "'");
  }
  fits::SweepFitOptions options;
  options.arch = args->Get("arch");
  options.target = target;
  options.bootstrap = 1000;
  options.threads = 0;
  for (const char* flag : {"bootstrap", "threads", "seed"}) {
    const std::string text = args->Get(flag, "");
    if (text.empty()) continue;
    int64_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 0) {
      return UsageError(
          err, kName,
          absl::StrCat("--", flag, ": expected an integer >= 0, got '", text,
                       "'"));
    }
    if (std::string(flag) == "bootstrap")
      options.bootstrap = static_cast<int>(n);
    if (std::string(flag) == "threads") options.threads = static_cast<int>(n);
    if (std::string(flag) == "seed") options.seed = static_cast<uint64_t>(n);
  }
  const std::string path = args->Get("db");
  if (path.empty()) return UsageError(err, kName, "--db needs a file");
  if (access(path.c_str(), R_OK) != 0) {
    return Failure(err, kName,
                   absl::StrCat("cannot read ", path,
                                "; give the coordinator's database file"));
  }
  absl::StatusOr<std::unique_ptr<store::QueryEngine>> query =
      store::QueryEngine::Open(path);
  if (!query.ok())
    return Failure(err, kName, std::string(query.status().message()));
  int64_t sweep_id = 0;
  std::string spec_text;
  absl::Status found =
      fits::FindStoredSweep(**query, args->Get("sweep"), &sweep_id, &spec_text);
  if (!found.ok()) return Failure(err, kName, std::string(found.message()));
  absl::StatusOr<v1::SweepSpec> spec =
      sweep::ParseSweepSpec(spec_text, sweep::SpecFormat::kAuto);
  if (!spec.ok()) {
    return Failure(err, kName,
                   absl::StrCat("stored spec of sweep ", sweep_id,
                                " does not parse: ", spec.status().message()));
  }
  v1::FitSpec fit = sweep::WithDefaults(*spec).fit();
  if (!target.empty() && std::find(fit.targets().begin(), fit.targets().end(),
                                   target) == fit.targets().end()) {
    fit.add_targets(target);
  }
  absl::StatusOr<std::vector<fits::SweepFit>> fits =
      fits::FitSweepRuns(**query, sweep_id, fit, options);
  if (!fits.ok()) {
    return Failure(err, kName, std::string(fits.status().message()));
  }
  if (fits->empty()) {
    return Failure(err, kName,
                   absl::StrCat("sweep ", sweep_id, " has no succeeded runs",
                                options.arch.empty()
                                    ? std::string()
                                    : " of architecture " + options.arch));
  }
  const bool json = args->Has("json");
  int code = kExitOk;
  nlohmann::ordered_json all = nlohmann::ordered_json::object();
  for (const fits::SweepFit& f : *fits) {
    if (!f.fitted) {
      err << "hlab fit: architecture " << f.arch << ", target " << f.target
          << ": " << f.reason << "\n";
      if (f.target == "loss" || !target.empty()) code = kExitFailed;
      continue;
    }
    if (json) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(
          analysis::PowerLawReportToJson(f.report));
      if (fits->size() > 1 && target.empty()) {
        all[f.arch][f.target] = std::move(j);
      } else {
        all[f.arch] = std::move(j);
      }
    } else {
      out << "architecture " << f.arch << ": " << f.n_fit << " fit runs, "
          << f.n_verify << " verify runs, target " << f.target << "\n"
          << analysis::FormatPowerLawReport(f.report) << "\n";
    }
  }
  if (json) out << all.dump(2) << "\n";
  return code;
}

}  // namespace

Command FitCommand() {
  Command c;
  c.name = kName;
  c.summary = "fit power laws L(N, D) = E + A/N^alpha + B/D^beta";
  c.usage =
      hlab::analysis::FitUsage("hlab fit") +
      "\nFrom a coordinator:\n"
      "  hlab fit --sweep S [--arch A] [--target loss|longppl|train_loss]\n"
      "           [--bootstrap K] [--threads T] [--seed S] "
      "[--verify-n-above N] [--json]\n"
      "fits one law per architecture to the sweep's succeeded runs: N = "
      "non-embedding\n"
      "parameters, D = tokens, and the run's final validation loss (loss, "
      "the\n"
      "default), log LongPPL (longppl) or training loss (train_loss); --json\n"
      "prints one object keyed by architecture.\n"
      "\nFrom a database file (read-only; no coordinator needed):\n"
      "  hlab fit --db FILE.db [--sweep S] [--arch A] [--target "
      "loss|longppl]\n"
      "           [--bootstrap K] [--threads T] [--seed S] [--json]\n"
      "fits the sweep's succeeded runs as the coordinator's automatic fits "
      "do: the\n"
      "spec's fit scales, R^2 on its verify scales, every target of its fit "
      "section\n"
      "unless --target names one (--json: one object keyed by "
      "architecture, then\n"
      "by target when there are several).\n";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    for (const std::string& a : args) {
      if (a == "--db" || a.rfind("--db=", 0) == 0) {
        return FitDatabase(args, out, err);
      }
      if (a == "--sweep" || a.rfind("--sweep=", 0) == 0) {
        return FitSweepRemote(args, out, err);
      }
    }
    return hlab::analysis::RunFitCommand(args, out, err, "hlab fit");
  };
  return c;
}

}  // namespace hlab::cli
