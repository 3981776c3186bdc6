#include "worker/stale_trainers.h"
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace hlab::worker {
namespace {

constexpr char kPidFile[] = "trainer.pids";

std::string PidFile(const std::string& dir) {
  return (std::filesystem::path(dir) / kPidFile).string();
}

}  // namespace

std::string ProcessStartTime(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return "";
  // Fields after the command (which may hold spaces) start at field 3;
  // starttime is field 22.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return "";
    if (i == 3 && field == "Z") return "";  // a zombie is gone
  }
  return field;
}

absl::Status RecordTrainerPids(const std::string& dir,
                               const std::vector<pid_t>& pids) {
  std::ofstream out(PidFile(dir), std::ios::trunc);
  for (pid_t pid : pids) out << pid << " " << ProcessStartTime(pid) << "\n";
  if (!out.good()) {
    return absl::InternalError(absl::StrCat("cannot write ", PidFile(dir)));
  }
  return absl::OkStatus();
}

void ClearTrainerPids(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(PidFile(dir), ec);
}

int StopStaleTrainers(const std::string& dir, absl::Duration grace) {
  std::ifstream in(PidFile(dir));
  std::vector<std::pair<pid_t, std::string>> alive;
  pid_t pid;
  std::string start;
  while (in >> pid >> start) {
    if (pid > 1 && !start.empty() && ProcessStartTime(pid) == start) {
      alive.emplace_back(pid, start);
    }
  }
  if (alive.empty()) return 0;
  HLAB_LOG(WARNING) << dir << ": " << alive.size()
                    << " trainer(s) of an earlier worker still running; "
                       "stopping them";
  auto signal_all = [&](int sig) {
    for (const auto& [p, s] : alive) {
      if (ProcessStartTime(p) != s) continue;
      ::kill(-p, sig);
      ::kill(p, sig);
    }
  };
  auto any_alive = [&] {
    for (const auto& [p, s] : alive) {
      if (ProcessStartTime(p) == s) return true;
    }
    return false;
  };
  signal_all(SIGTERM);
  absl::Time deadline = absl::Now() + grace;
  bool killed = false;
  while (any_alive()) {
    if (absl::Now() >= deadline) {
      if (killed) {
        HLAB_LOG(ERROR) << dir << ": stale trainers survive SIGKILL";
        break;
      }
      signal_all(SIGKILL);
      killed = true;
      deadline = absl::Now() + grace;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return static_cast<int>(alive.size());
}

}  // namespace hlab::worker
