// The sample printers' command line (common/flag_map.h).
#include "common/flag_map.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace hlab {

absl::Status ParseFlagMap(int argc, char** argv,
                          std::map<std::string, std::string>* flags,
                          bool* help) {
  *help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return absl::OkStatus();
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError("unexpected argument " + arg);
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " needs a value"));
    }
    if (flags->count(name) == 0) {
      return absl::InvalidArgumentError("unknown flag --" + name);
    }
    (*flags)[name] = value;
  }
  return absl::OkStatus();
}

}  // namespace hlab
