#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains one small hybrid
# model, printing its loss curve. (When the orchestration service lands this
# becomes `hlab up`: a whole sweep on local workers.)
#
#   scripts/demo.sh                 # swa-32 hybrid, 200 steps (~1-2 min)
#   scripts/demo.sh --arch gdn      # extra arguments go to hlab-train
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export HLAB_SHARED_DIR=${HLAB_SHARED_DIR:-$(cd .. && pwd)/shared}
exec build/bin/hlab-train --arch swa-32 --steps 200 --seq-len 128 --batch 16 "$@"
