// The fake trainer of the worker tests: a bash script that answers
// --probe-devices (with <bin>/probe.json if present, else one CPU with 3
// cores) and, for a task, runs the behaviour named by the task file's
// "behavior" field (<bin>/behaviors/<name>.sh), which writes records to fd 3
// with `rec '{...}'` and exits as it likes. It leaves in the task dir:
// args.txt (one line of arguments per rank), pid, cuda (CUDA_VISIBLE_DEVICES),
// omp_wait_policy (OMP_WAIT_POLICY), program (the script's file name:
// fake-train or fake-eval).
//
// Behaviours: ok (3 steps, an eval, a checkpoint, exit 0), permanent (error
// record, exit 2), retryable (exit 75), crash (SIGSEGV), sleep (runs until
// killed; SIGTERM writes a checkpoint and exits 75, like hlab-train), hang
// (one step, then SIGSTOP of itself; SIGTERM exits 75), gang
// (rank 1 exits 75, rank 0 runs until terminated), wait_go (finishes once
// the file "go" appears in its task dir).
//
// The fake evaluator (WriteFakeEvaluator) is the same script under the name
// fake-eval, following hlab-eval's record contract (docs/evaluation.md):
// eval_ok (start, progress, three results with details, done, exit 0),
// eval_permanent (error record, exit 2), eval_silent (exit 0 without a
// result).
//
// Not thread-safe; call from test set-up.
//
//   std::string trainer = WriteFakeTrainer(tmp / "bin");
//   std::string evaluator = WriteFakeEvaluator(tmp / "bin");
#ifndef HLAB_TESTS_WORKER_FAKE_TRAINER_H_
#define HLAB_TESTS_WORKER_FAKE_TRAINER_H_

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace hlab::worker::testing {

inline constexpr char kFakeTrainer[] = R"sh(#!/bin/bash
if [ "$1" = "--probe-devices" ]; then
  if [ -e "$(dirname "$0")/probe.json" ]; then cat "$(dirname "$0")/probe.json"; exit 0; fi
  echo '{"cpu":{"cores":3,"memory_bytes":4096},"cuda":[],"cuda_build":false}'
  exit 0
fi
args="$*"
task=""
while [ $# -gt 0 ]; do
  case "$1" in --task) task="$2"; shift;; esac
  shift
done
dir=$(dirname "$task")
echo "$args" >> "$dir/args.txt"
basename "$0" > "$dir/program"
ckdir=$(sed -n 's/.*"dir": *"\([^"]*\)".*/\1/p' "$task" | head -1)
behavior=$(sed -n 's/.*"name": *"behavior=\([^"]*\)".*/\1/p' "$task" | head -1)
rec() { echo "$1" >&3; }
echo $$ > "$dir/pid"
echo "${CUDA_VISIBLE_DEVICES-unset}" > "$dir/cuda"
echo "${OMP_WAIT_POLICY-unset}" > "$dir/omp_wait_policy"
. "$(dirname "$0")/behaviors/$behavior.sh"
)sh";

// Behaviours, by name.
inline const std::map<std::string, std::string>& Behaviors() {
  static const auto* b = new std::map<std::string, std::string>{
      {"ok", R"(
rec '{"type":"start","steps":3}'
for s in 1 2 3; do
  rec "{\"type\":\"step\",\"step\":$s,\"tokens\":$((s*64)),\"loss\":$s.5,\"lr\":0.01,\"grad_norm\":0.5,\"tokens_per_s\":100}"
done
rec '{"type":"eval","step":3,"tokens":192,"val_loss":2.25,"val_recall_loss":4.5}'
echo data > "$ckdir/step-3.ckpt"
rec "{\"type\":\"checkpoint\",\"step\":3,\"tokens\":192,\"kind\":\"latest\",\"path\":\"$ckdir/step-3.ckpt\",\"sha256\":\"abc123\"}"
rec '{"type":"done","step":3,"tokens":192,"loss":3.5}'
exit 0
)"},
      {"permanent", R"(
rec '{"type":"error","exit_code":2,"message":"model.d_model must be divisible by n_heads"}'
exit 2
)"},
      {"retryable", R"(
rec '{"type":"error","exit_code":75,"message":"out of memory"}'
exit 75
)"},
      {"crash", R"(
rec '{"type":"step","step":1,"tokens":64,"loss":9}'
kill -SEGV $$
)"},
      // Runs until killed; SIGTERM writes a checkpoint and exits 75, like
      // hlab-train.
      {"sleep", R"(
trap 'echo x > "$ckdir/step-7.ckpt"; rec "{\"type\":\"checkpoint\",\"step\":7,\"tokens\":448,\"kind\":\"latest\",\"path\":\"$ckdir/step-7.ckpt\",\"sha256\":\"ff\"}"; exit 75' TERM
rec '{"type":"step","step":7,"tokens":448,"loss":1.25,"tokens_per_s":50}'
touch "$dir/running"
while true; do sleep 0.05; done
)"},
      // Hangs: one step, then stops itself (SIGSTOP) until continued;
      // SIGTERM exits 75.
      {"hang", R"(
trap 'exit 75' TERM
rec '{"type":"step","step":1,"tokens":64,"loss":4}'
kill -STOP $$
while true; do sleep 0.05; done
)"},
      // Rank 1 dies; rank 0 runs until terminated.
      {"gang", R"sh(
case "$args" in
  *"--rank 1 "*)
    while [ ! -e "$dir/rank0" ]; do sleep 0.02; done
    exit 75 ;;
esac
trap 'exit 75' TERM
touch "$dir/rank0"
while true; do sleep 0.05; done
)sh"},
      // Waits for a file "go" in the task dir, then finishes.
      {"wait_go", R"(
rec '{"type":"step","step":1,"tokens":64,"loss":4}'
touch "$dir/running"
while [ ! -e "$dir/go" ]; do sleep 0.05; done
rec '{"type":"step","step":2,"tokens":128,"loss":3}'
exit 0
)"},
      // hlab-eval's records: a result at the task's step (none given), one
      // at an explicit step, and NIAH per kind.
      {"eval_ok", R"(
rec '{"type":"start","task_id":"t","run_id":"run-e","step":40,"evals":["val_loss","niah"]}'
rec '{"type":"progress","eval":"niah","done":1,"total":2}'
rec '{"type":"result","run_id":"run-e","metric":"val_loss","value":2.5,"details":{"tokens":4096,"documents":8,"source":"synthetic"}}'
rec '{"type":"result","run_id":"run-e","step":40,"metric":"niah_acc","value":0.75,"details":{"cells":[{"kind":"single","length":64,"depth":0.5,"acc":0.75}]}}'
rec '{"type":"result","run_id":"run-e","step":40,"metric":"niah_acc/single","value":0.75}'
rec '{"type":"warning","message":"only 8 documents"}'
rec '{"type":"done","seconds":0.5}'
exit 0
)"},
      {"eval_permanent", R"(
rec '{"type":"error","exit_code":2,"message":"checkpoint /x/step-40.ckpt: no such file"}'
exit 2
)"},
      {"eval_silent", R"(
rec '{"type":"done","seconds":0.1}'
exit 0
)"},
  };
  return *b;
}

// A valid hlab-train task (the worker reads its task files) whose name
// selects the fake trainer's behaviour; for an EVAL task, its "config".
inline nlohmann::json FakeTrainTask(const std::string& behavior) {
  return nlohmann::json{{"name", "behavior=" + behavior},
                        {"model",
                         {{"arch", "full"},
                          {"d_model", 16},
                          {"n_layers", 1},
                          {"n_heads", 2},
                          {"n_kv_heads", 1},
                          {"vocab_size", 258}}},
                        {"budget_tokens", 4096}};
}

// Writes the script and its behaviours into `bin`; returns the script path.
inline std::string WriteFakeTrainer(const std::filesystem::path& bin) {
  std::filesystem::create_directories(bin / "behaviors");
  const std::string path = (bin / "fake-train").string();
  std::ofstream(path) << kFakeTrainer;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  for (const auto& [name, body] : Behaviors()) {
    std::ofstream(bin / "behaviors" / (name + ".sh")) << body;
  }
  return path;
}

// Writes the same script as `bin`/fake-eval (and the behaviours); returns
// its path.
inline std::string WriteFakeEvaluator(const std::filesystem::path& bin) {
  WriteFakeTrainer(bin);
  const std::string path = (bin / "fake-eval").string();
  std::ofstream(path) << kFakeTrainer;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

}  // namespace hlab::worker::testing

#endif  // HLAB_TESTS_WORKER_FAKE_TRAINER_H_
