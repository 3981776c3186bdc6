#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains one small hybrid
# model (the example task: swa-32, 100 steps on the built-in synthetic
# corpus), printing its loss curve: train loss every 5 steps, held-out and
# recall-token loss every 25. (When the orchestration service lands this
# becomes `hlab up`: a whole sweep on local workers.)
#
#   scripts/demo.sh                      # the example task
#   scripts/demo.sh --task my_task.json  # extra arguments go to hlab-train
#
# Records (JSON lines) are kept in build/demo/records.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p build/demo
build/bin/hlab-train --example-task > build/demo/task.json
args=("$@")
if [[ ${#args[@]} -eq 0 ]]; then args=(--task build/demo/task.json); fi
exec build/bin/hlab-train "${args[@]}" --progress \
  --record-fd 3 3> build/demo/records.jsonl
