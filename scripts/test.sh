#!/usr/bin/env bash
# The test command: installs dependencies, builds (warnings as errors), checks
# formatting, runs the parsers' fuzzers briefly (HLAB_FUZZ_SECONDS each,
# default 10; 0 skips), the LibTorch-free modules' tests under ASan+UBSan and
# TSan (scripts/sanitize.sh; HLAB_SANITIZE=0 skips) and the whole test suite
# with ctest.
#
#   scripts/test.sh                # everything
#   scripts/test.sh -L fast        # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
HLAB_WERROR=ON scripts/setup.sh
scripts/check_format.sh
# The parsers' libFuzzer targets, briefly (tests/fuzz/, docs/testing.md),
# before ctest so that its summary closes the output. 0 skips them.
fuzz_seconds=${HLAB_FUZZ_SECONDS:-10}
if [[ "$fuzz_seconds" != 0 ]]; then
  scripts/fuzz.sh --seconds "$fuzz_seconds"
fi
# The LibTorch-free modules' tests in two sanitizer trees (build-asan/,
# build-tsan/; docs/testing.md). 0 skips them.
if [[ "${HLAB_SANITIZE:-1}" != 0 ]]; then
  scripts/sanitize.sh
fi
build_dir=${HLAB_BUILD_DIR:-build}
# Tests that read ../shared/data skip with a message when it is absent.
export HLAB_SHARED_DIR=${HLAB_SHARED_DIR:-$(cd .. && pwd)/shared}
cd "$build_dir"
ctest --output-on-failure --timeout 1500 "$@"
