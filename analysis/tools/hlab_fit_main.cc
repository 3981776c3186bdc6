// hlab-fit: fits a separable scaling law to (N, D, loss) points.
//
//   hlab-fit --points runs.csv --verify-n-above 1e9 --threads 2
//   hlab-fit --chinchilla ../shared/data/scaling_law/chinchilla_fig4_points.csv
//   --json
//
// A thin wrapper: the logic is RunFitCommand (analysis/fit_csv_command.h),
// which the project CLI also calls as `hlab fit`.
#include <iostream>
#include <string>
#include <vector>

#include "analysis/fit_csv_command.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return hlab::analysis::RunFitCommand(args, std::cout, std::cerr);
}
