// `hlab fit`: the offline power-law fitter of hlab-fit (analysis/
// fit_command.h) with the same flags and output, and `--sweep S`, which
// takes the points (N, D, final loss) of a sweep's succeeded runs from the
// coordinator and fits one law per architecture.
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

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/fit_command.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

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

int FitSweep(const std::vector<std::string>& argv, std::ostream& out,
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
      "--db FILE (fit from a store file) is not implemented yet.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    for (const std::string& a : args) {
      if (a == "--db" || a.rfind("--db=", 0) == 0) {
        err << "hlab fit: error: --db is not implemented yet; use --sweep S "
               "with a coordinator, or --points FILE.csv\n";
        return kExitUsage;
      }
      if (a == "--sweep" || a.rfind("--sweep=", 0) == 0) {
        return FitSweep(args, out, err);
      }
    }
    return hlab::analysis::RunFitCommand(args, out, err, "hlab fit");
  };
  return c;
}

}  // namespace hlab::cli
