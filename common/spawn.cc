#include "common/spawn.h"
#include <signal.h>
#include <spawn.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace hlab {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

void SpawnOptions::Open(int fd, std::string path, int flags, int mode) {
  actions.push_back({Action::kOpen, fd, -1, std::move(path), flags, mode});
}

void SpawnOptions::Dup2(int from, int to) {
  actions.push_back({Action::kDup2, to, from, "", 0, 0});
}

void SpawnOptions::Close(int fd) {
  actions.push_back({Action::kClose, fd, -1, "", 0, 0});
}

absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: no program to run");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const SpawnOptions::Action& a : options.actions) {
    switch (a.kind) {
      case SpawnOptions::Action::kOpen:
        posix_spawn_file_actions_addopen(&actions, a.fd, a.path.c_str(),
                                         a.flags, static_cast<mode_t>(a.mode));
        break;
      case SpawnOptions::Action::kDup2:
        posix_spawn_file_actions_adddup2(&actions, a.from, a.fd);
        break;
      case SpawnOptions::Action::kClose:
        posix_spawn_file_actions_addclose(&actions, a.fd);
        break;
    }
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = 0;
  if (options.reset_signal_mask) {
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigmask(&attr, &empty);
    flags |= POSIX_SPAWN_SETSIGMASK;
  }
  if (options.default_signal_handlers) {
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigdefault(&attr, &all);
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  if (options.new_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);

  std::vector<std::string> args = argv;
  std::vector<char*> c_args = CStrings(args);
  std::vector<std::string> env;
  std::vector<char*> c_env;
  if (options.environment) {
    env = *options.environment;
    c_env = CStrings(env);
  }
  pid_t pid = 0;
  const int rc =
      ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, c_args.data(),
                    options.environment ? c_env.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc == 0) return pid;
  const std::string message =
      absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc));
  if (rc == ENOENT) return absl::NotFoundError(message);
  if (rc == EACCES) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace hlab
