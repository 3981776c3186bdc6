// Command-line flag parsing shared by hlab's commands: "--name value",
// "--name=value", boolean "--name", positional arguments, and "--" to end
// the flags.
//
// Thread-compatible: a ParsedArgs is a plain value.
//
//   absl::StatusOr<ParsedArgs> args =
//       ParseArgs(argv, {{"format", true}, {"all", false}});
//   if (!args.ok()) return UsageError(err, "runs", args.status().message());
//   std::string format = args->Get("format", "table");
#ifndef HLAB_CLI_FLAGS_H_
#define HLAB_CLI_FLAGS_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::cli {

struct FlagDef {
  std::string name;  // without the leading "--"
  bool takes_value = true;
};

class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string Get(const std::string& name,
                  const std::string& fallback = "") const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(
      const std::vector<std::string>& args, const std::vector<FlagDef>& flags);
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// Parses `args` against `flags`. InvalidArgument for an unknown option, a
// missing value or a value given to a boolean flag; the message names it.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagDef>& flags);

// Prints "hlab <command>: error: <what>; run 'hlab <command> --help'" and
// returns kExitUsage.
int UsageError(std::ostream& err, absl::string_view command,
               absl::string_view what);

// Prints "hlab <command>: error: <message>" and returns kExitFailed.
int Failure(std::ostream& err, absl::string_view command,
            absl::string_view message);

// Parses a whole non-negative decimal integer; InvalidArgument naming `flag`.
absl::StatusOr<long long> ParseCount(absl::string_view flag,
                                     absl::string_view text);

}  // namespace hlab::cli

#endif  // HLAB_CLI_FLAGS_H_
