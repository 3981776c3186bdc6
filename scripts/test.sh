#!/usr/bin/env bash
# The test command: installs dependencies, builds (warnings as errors), checks
# formatting, and runs the whole test suite with ctest.
#
#   scripts/test.sh                # everything
#   scripts/test.sh -L fast        # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
HLAB_WERROR=ON scripts/setup.sh
scripts/check_format.sh
build_dir=${HLAB_BUILD_DIR:-build}
# Tests that read ../shared/data skip with a message when it is absent.
export HLAB_SHARED_DIR=${HLAB_SHARED_DIR:-$(cd .. && pwd)/shared}
cd "$build_dir"
ctest --output-on-failure --timeout 1500 "$@"
