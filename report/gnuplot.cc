// RenderPlots: runs gnuplot on the figure scripts (see plots.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "report/plots.h"

namespace hlab::report {
namespace {

// `program` as a path to run: itself when it names a path, else its first
// executable match in PATH; "" when there is none.
std::string FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", program);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

struct ProcessResult {
  int exit_code = -1;  // -1: did not start or was killed
  std::string output;  // stdout and stderr together
};

// Runs `argv` in directory `dir`, with stdin from /dev/null.
ProcessResult RunIn(const std::string& dir,
                    const std::vector<std::string>& argv) {
  ProcessResult result;
  int fds[2];
  if (pipe(fds) != 0) {
    result.output = "cannot create a pipe";
    return result;
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    result.output = "cannot fork";
    return result;
  }
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (chdir(dir.c_str()) != 0) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) {
    if (result.output.size() < (1 << 16)) result.output.append(buffer, n);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

bool NonEmptyFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

}  // namespace

absl::Status RenderPlots(const std::string& dir, const PlotOptions& options,
                         std::vector<Plot>* plots) {
  const std::string gnuplot = FindProgram(options.gnuplot);
  if (gnuplot.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gnuplot not found (looked for '", options.gnuplot,
        "'): the tables are written but no figure was drawn; install "
        "gnuplot-nox (apt-get install gnuplot-nox), then run hlab report "
        "again, or `gnuplot NAME.gp` in ",
        dir));
  }
  std::vector<std::string> failures;
  bool png = options.png;
  for (Plot& plot : *plots) {
    if (!plot.scripted) continue;
    const std::string script = plot.name + ".gp";
    const std::string svg = absl::StrCat(dir, "/", plot.name, ".svg");
    std::remove(svg.c_str());
    const ProcessResult r = RunIn(dir, {gnuplot, script});
    plot.svg = r.exit_code == 0 && NonEmptyFile(svg);
    if (!plot.svg) {
      failures.push_back(absl::StrCat(
          script, ": gnuplot ",
          r.exit_code == 0 ? std::string("wrote no SVG")
                           : absl::StrCat("exited with ", r.exit_code),
          r.output.empty() ? "" : ": " + r.output));
      continue;
    }
    if (!png) continue;
    const std::string png_file = absl::StrCat(dir, "/", plot.name, ".png");
    std::remove(png_file.c_str());
    const ProcessResult p = RunIn(dir, {gnuplot, "-e", "fmt=\"png\"", script});
    plot.png = p.exit_code == 0 && NonEmptyFile(png_file);
    // No PNG terminal (e.g. a gnuplot built without cairo): SVG only.
    if (!plot.png) {
      std::remove(png_file.c_str());
      png = false;
    }
  }
  if (!failures.empty()) {
    return absl::InternalError(absl::StrJoin(failures, "\n"));
  }
  return absl::OkStatus();
}

}  // namespace hlab::report
