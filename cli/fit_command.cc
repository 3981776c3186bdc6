// `hlab fit`: the offline power-law fitter of hlab-fit (analysis/
// fit_command.h), with the same flags and output.
#include "analysis/fit_command.h"

#include <string>
#include <vector>

#include "cli/client_commands.h"
#include "cli/flags.h"

namespace hlab::cli {

Command FitCommand() {
  Command c;
  c.name = "fit";
  c.summary = "fit power laws L(N, D) = E + A/N^alpha + B/D^beta to points";
  c.usage = hlab::analysis::FitUsage("hlab fit") +
            "\n--db FILE (fit a sweep's runs from the store) is not "
            "implemented yet.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    for (const std::string& a : args) {
      if (a == "--db" || a.rfind("--db=", 0) == 0) {
        err << "hlab fit: error: --db is not implemented yet; export the "
               "points with `hlab query ... --format csv` and use --points\n";
        return kExitUsage;
      }
    }
    return hlab::analysis::RunFitCommand(args, out, err, "hlab fit");
  };
  return c;
}

}  // namespace hlab::cli
