#include "common/process_usage.h"
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hlab {
namespace {

// "VmRSS:    1234 kB" -> bytes; 0 when absent.
int64_t StatusKilobytes(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

}  // namespace

std::string ReadRestOfProcFile(std::ifstream& in) {
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    // The process exited between the open and the read.
  }
  return text;
}

ProcessUsage ReadProcessUsage(pid_t pid) {
  ProcessUsage usage;
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  const std::string stat = ReadRestOfProcFile(stat_file);
  // Fields after the command's closing parenthesis: state is field 3, utime
  // 14, stime 15, cutime 16, cstime 17, num_threads 20 (proc(5)).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return usage;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0, cutime = 0, cstime = 0, threads = 0;
  if (fields.size() < 18 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime) ||
      !absl::SimpleAtoi(fields[13], &cutime) ||
      !absl::SimpleAtoi(fields[14], &cstime) ||
      !absl::SimpleAtoi(fields[17], &threads)) {
    return usage;
  }
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  usage.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  usage.children_cpu_seconds = static_cast<double>(cutime + cstime) / ticks;
  usage.threads = static_cast<int>(threads);
  std::ifstream status_file(absl::StrCat("/proc/", pid, "/status"));
  const std::string status = ReadRestOfProcFile(status_file);
  usage.rss_bytes = StatusKilobytes(status, "VmRSS");
  usage.peak_rss_bytes = StatusKilobytes(status, "VmHWM");
  return usage;
}

}  // namespace hlab
