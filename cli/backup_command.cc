// `hlab backup --db FILE --out BACKUP.db [--force] [--pages N] [--quiet]`:
// a consistent copy of a coordinator's database while it runs
// (coordinator/store/backup.h). Reads the file directly: it must run on the
// coordinator's host (or wherever the file is).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "coordinator/store/backup.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "backup";

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, {{"db", true},
                                                     {"out", true},
                                                     {"force", false},
                                                     {"pages", true},
                                                     {"quiet", false}});
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (!args->positional().empty()) {
    return UsageError(err, kName,
                      "unexpected argument '" + args->positional()[0] + "'");
  }
  const std::string db = args->Get("db");
  const std::string dest = args->Get("out");
  if (db.empty()) return UsageError(err, kName, "--db FILE is required");
  if (dest.empty()) return UsageError(err, kName, "--out FILE is required");
  store::BackupOptions options;
  options.force = args->Has("force");
  if (args->Has("pages")) {
    absl::StatusOr<long long> pages = ParseCount("--pages", args->Get("pages"));
    if (!pages.ok()) return UsageError(err, kName, pages.status().message());
    if (*pages <= 0 || *pages > (1 << 30)) {
      return UsageError(err, kName, "--pages: expected 1 to 2^30");
    }
    options.pages_per_step = static_cast<int>(*pages);
  }
  // Outside the if: options.progress refers to it during BackupDatabase.
  int last_percent = -1;
  if (!args->Has("quiet")) {
    options.progress = [&err, &last_percent](int64_t done, int64_t total) {
      const int percent =
          total > 0 ? static_cast<int>(100 * done / total) : 100;
      if (percent / 10 == last_percent / 10 && percent != 100) return;
      last_percent = percent;
      err << absl::StrFormat("hlab backup: %d%% (%d of %d pages)\n", percent,
                             done, total);
    };
  }
  absl::StatusOr<store::BackupResult> result =
      store::BackupDatabase(db, dest, options);
  if (!result.ok()) return Failure(err, kName, result.status().message());
  out << absl::StrFormat(
      "backup of %s written to %s: %d pages, %d bytes, integrity ok\n", db,
      dest, result->pages, result->bytes);
  return kExitOk;
}

}  // namespace

Command BackupCommand() {
  Command c;
  c.name = kName;
  c.summary = "copy a live coordinator database (SQLite online backup)";
  c.usage =
      "usage: hlab backup --db FILE --out BACKUP.db [--force] [--pages N]\n"
      "                   [--quiet]\n\n"
      "Copies the coordinator's database FILE to BACKUP.db while the\n"
      "coordinator runs: one consistent snapshot (SQLite's online backup API\n"
      "inside one read transaction), N pages per step (1024), progress on\n"
      "stderr (not with --quiet), checked with PRAGMA integrity_check, and\n"
      "renamed into place only when complete. An existing BACKUP.db is left\n"
      "alone unless --force. Run it where the file is (the coordinator's\n"
      "host). Restore: stop the coordinator, copy BACKUP.db over FILE (and\n"
      "delete FILE-wal and FILE-shm), start it (docs/operations.md).";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
