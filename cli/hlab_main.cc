// hlab: the command-line interface. See cli/cli.h and docs/cli.md.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return hlab::cli::RunCli(args, std::cout, std::cerr);
}
