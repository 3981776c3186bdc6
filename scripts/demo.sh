#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs `hlab up`: a
# coordinator and two local workers on loopback run the embedded demo sweep
# (examples/sweeps/demo.yaml: full, swa-16, swa-64 and gdn x 4 scales x
# 3 budgets, 48 runs on the built-in synthetic corpus, about 7.5 minutes on
# 2 cores), then print every run's final loss and the fitted power laws,
# and write the sweep's report (tables, figures) to hlab-up/report/index.html.
#
#   scripts/demo.sh                         # the demo sweep, in ./hlab-up
#   scripts/demo.sh my_sweep.yaml --workers 4 --dir /tmp/run1
#                                           # extra arguments go to hlab up
#
# The database (hlab-up/hlab.db), logs (hlab-up/logs) and report
# (hlab-up/report) stay afterwards;
# running again on the same directory resubmits the same sweep, which is
# found already done.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/hlab up "$@"
