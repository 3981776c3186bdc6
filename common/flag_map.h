// ParseFlagMap: the command line of the small sample printers (hlab-niah,
// hlab-ruler): "--name value" or "--name=value" for names given in advance
// with their defaults, and --help / -h. Errors are one line naming the
// argument: "unexpected argument x", "flag --length needs a value",
// "unknown flag --x".
//
// Thread-safety: a pure function.
//
//   std::map<std::string, std::string> flags = {{"length", ""}};
//   bool help = false;
//   absl::Status parsed = ParseFlagMap(argc, argv, &flags, &help);
#ifndef HLAB_COMMON_FLAG_MAP_H_
#define HLAB_COMMON_FLAG_MAP_H_

#include <map>
#include <string>

#include "absl/status/status.h"

namespace hlab {

// Reads argv[1..argc) into *flags, whose keys are the known names (without
// dashes). *help is set, and parsing stops, at --help or -h.
absl::Status ParseFlagMap(int argc, char** argv,
                          std::map<std::string, std::string>* flags,
                          bool* help);

}  // namespace hlab

#endif  // HLAB_COMMON_FLAG_MAP_H_
