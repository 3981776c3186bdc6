#include "cli/cli.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hlab::cli {

void CommandRegistry::Register(Command command) {
  for (Command& existing : commands_) {
    if (existing.name == command.name) {
      existing = std::move(command);
      return;
    }
  }
  commands_.push_back(std::move(command));
}

const Command* CommandRegistry::Find(const std::string& name) const {
  for (const Command& command : commands_) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string HelpText(const CommandRegistry& registry) {
  std::string out =
      "hlab: scaling-law studies of hybrid-attention language models\n\n"
      "usage: hlab <command> [options] [arguments]\n"
      "       hlab help [command]\n"
      "       hlab --version\n\n"
      "commands:\n";
  size_t width = 0;
  for (const Command& c : registry.commands()) {
    width = std::max(width, c.name.size());
  }
  for (const Command& c : registry.commands()) {
    absl::StrAppend(&out, "  ", c.name,
                    std::string(width - c.name.size() + 2, ' '), c.summary,
                    "\n");
  }
  absl::StrAppend(
      &out,
      "\nexit codes: 0 success, 1 the command failed (invalid "
      "spec, missing file, server error),\n"
      "            2 usage error (unknown command or option, bad value)\n"
      "connection: --address HOST:PORT (HLAB_ADDRESS, default "
      "127.0.0.1:50151),\n"
      "            --token T | --token-file F (HLAB_TOKEN, "
      "HLAB_TOKEN_FILE),\n"
      "            --tls-ca F [--tls-cert F --tls-key F] "
      "(HLAB_TLS_CA, ...), --timeout S\n"
      "docs: docs/cli.md, docs/sweeps.md\n");
  return out;
}

int RunCli(const CommandRegistry& registry,
           const std::vector<std::string>& args, std::ostream& out,
           std::ostream& err) {
  if (args.empty()) {
    err << "hlab: error: no command given; run 'hlab help' for the list\n";
    return kExitUsage;
  }
  const std::string& name = args[0];
  if (name == "help" || name == "--help" || name == "-h") {
    if (args.size() >= 2) {
      const Command* c = registry.Find(args[1]);
      if (c == nullptr) {
        err << "hlab help: error: unknown command '" << args[1]
            << "'; run 'hlab help' for the list\n";
        return kExitUsage;
      }
      out << c->usage << "\n";
      return kExitOk;
    }
    out << HelpText(registry);
    return kExitOk;
  }
  const Command* command = registry.Find(name);
  if (command == nullptr) {
    err << "hlab: error: unknown command '" << name
        << "'; run 'hlab help' for the list\n";
    return kExitUsage;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& a : rest) {
    if (a == "--help" || a == "-h") {
      out << command->usage << "\n";
      return kExitOk;
    }
  }
  try {
    return command->run(rest, out, err);
  } catch (const std::exception& e) {
    err << "hlab " << name << ": error: " << e.what() << "\n";
    return kExitFailed;
  }
}

int RunCli(const std::vector<std::string>& args, std::ostream& out,
           std::ostream& err) {
  CommandRegistry registry;
  RegisterBuiltinCommands(&registry);
  return RunCli(registry, args, out, err);
}

}  // namespace hlab::cli
