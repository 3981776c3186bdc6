// hlab: the command-line interface. See cli/cli.h and docs/cli.md.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "common/build_version.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "hlab " << hlab::BuildVersion() << "\n";
    return 0;
  }
  return hlab::cli::RunCli(args, std::cout, std::cerr);
}
