// Checkpoint files: atomic, checksummed containers for a training state.
//
// A checkpoint is one file: a magic line, a JSON header (CheckpointMeta,
// including the SHA-256 of the payload) and the payload (the serialized
// model, optimizer and RNG state; train/training_state.h). It is written to
// a temporary file, fsynced, renamed into place and the directory fsynced,
// so a crash leaves either the old set of checkpoints or the new one, never
// a half-written file under a checkpoint's name.
//
// Names in a checkpoint directory:
//   step-<step, 10 digits>.ckpt   periodic / final checkpoints ("latest")
//   branch-<budget tokens>.ckpt   WSD branch points (never pruned)
//   kept-<step, 10 digits>.ckpt   kept for evaluation along training
//                                 (checkpoint.keep_every_steps; never
//                                 pruned)
//
// Thread-safety: free functions; concurrent writers to one directory are not
// supported (one task owns its directory).
//
//   CheckpointMeta meta;
//   meta.step = 100;
//   meta.tokens = 409600;
//   meta.kind = "latest";
//   HLAB_RETURN_IF_ERROR(WriteCheckpoint(dir + "/" + LatestName(100), meta,
//                                        payload));
//   HLAB_ASSIGN_OR_RETURN(auto newest, NewestValidCheckpoint(dir, &warnings));
#ifndef HLAB_TRAIN_CHECKPOINT_FILE_H_
#define HLAB_TRAIN_CHECKPOINT_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sha256.h"

namespace hlab::train {

struct CheckpointMeta {
  int64_t step = 0;                  // optimizer steps completed
  int64_t tokens = 0;                // training tokens consumed
  std::string kind;                  // "latest", "kept" or "branch"
  int64_t branch_budget_tokens = 0;  // for kind == "branch"
  std::string model_config;          // canonical model config JSON
  // Hash of everything that shapes the trajectory up to this step (model,
  // data, batch, optimizer, warmup, seeds): a checkpoint resumes only a task
  // with the same fingerprint.
  std::string fingerprint;
  // The training data's tokenizer identity (data::Vocabulary::tokenizer);
  // empty in checkpoints written before it was recorded.
  std::string tokenizer = "";
  std::string payload_sha256;  // filled in by WriteCheckpoint
};

struct CheckpointFile {
  std::string path;
  CheckpointMeta meta;
  std::string payload;
};

std::string LatestName(int64_t step);
std::string KeptName(int64_t step);
std::string BranchName(int64_t budget_tokens);

// Lower-case hex SHA-256 (common/sha256.h).
using ::hlab::Sha256Hex;

// Atomically writes a checkpoint (sets meta.payload_sha256) and returns
// the payload's SHA-256. Unavailable with the OS error for I/O failures
// (disk full, permissions); on any failure the temporary file is removed,
// nothing is written under `path`, and existing checkpoints are untouched.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& path,
                                            CheckpointMeta meta,
                                            const std::string& payload);

// Whether `status` (from WriteCheckpoint) is a write the storage refused:
// the disk or quota is full, the file system is read-only, the file would
// be too large, an I/O error (ENOSPC, EDQUOT, EROFS, EFBIG, EIO). Not a
// fault of the task: hlab-train exits kExitStorage (train/exit_codes.h).
bool IsStorageRefusal(const absl::Status& status);

// Reads and verifies a checkpoint. NotFound: no such file. DataLoss: the
// file is truncated, malformed or fails its checksum; the message names the
// file.
absl::StatusOr<CheckpointFile> ReadCheckpoint(const std::string& path);

// Reads only the header (no checksum verification).
absl::StatusOr<CheckpointMeta> ReadCheckpointMeta(const std::string& path);

// The checkpoint files in `dir` (every kind), newest step first; an absent
// directory has none.
std::vector<std::string> ListCheckpoints(const std::string& dir);

// The newest checkpoint in `dir` that passes its checksum, at or before
// `max_step` (-1: any). Corrupt ones are skipped, each with a line in
// `warnings`. nullopt when there is none.
std::optional<CheckpointFile> NewestValidCheckpoint(
    const std::string& dir, std::vector<std::string>* warnings,
    int64_t max_step = -1);

// Deletes all but the newest `keep_last` step-*.ckpt files; branch
// checkpoints are kept.
absl::Status PruneCheckpoints(const std::string& dir, int64_t keep_last);

}  // namespace hlab::train

#endif  // HLAB_TRAIN_CHECKPOINT_FILE_H_
