#!/usr/bin/env bash
# The LibTorch-free modules' tests under sanitizers (docs/testing.md): two
# clang trees configured with -DHLAB_SANITIZE (only those modules and their
# tests, -Wthread-safety on): build-asan/ with AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer runs every test it has;
# build-tsan/ with ThreadSanitizer builds and runs only the concurrent parts
# (the store's writer and leases, the lease queue, the coordinator's
# services and reactors, the worker daemon). Any report fails the script:
# each process writes its reports to <tree>/reports/, which the script
# prints (tests that expect a child process to fail cannot hide one).
#
#   scripts/sanitize.sh                  # both trees (CI)
#   scripts/sanitize.sh asan             # one tree: asan or tsan
#   scripts/sanitize.sh tsan -R writer   # extra arguments go to ctest
#
# Environment: HLAB_ASAN_BUILD_DIR (default build-asan), HLAB_TSAN_BUILD_DIR
# (default build-tsan), HLAB_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

trees=()
while (($#)); do
  case "$1" in
    asan|tsan) trees+=("$1"); shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
((${#trees[@]})) || trees=(asan tsan)

for p in clang-14 libclang-rt-14-dev; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "sanitize.sh: installing $p" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null; }
  fi
done

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# The trees carry line tables (-gline-tables-only), and with debug info
# ccache hashes the working directory unless told not to: a fresh clone
# elsewhere would miss every entry.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
jobs=${HLAB_JOBS:-$(nproc)}
supp=$PWD/tests/sanitizers
# Tests that read ../shared/data skip with a message when it is absent.
export HLAB_SHARED_DIR=${HLAB_SHARED_DIR:-$(cd .. && pwd)/shared}

# Left out of the ASan run: analysis_chinchilla_test fits the real
# Chinchilla points with the code analysis_fit_test covers (100 s under
# ASan on 2 cores, in Ceres mostly, which is not instrumented).
asan_skip=(analysis_chinchilla_test)
# The TSan tree's tests: the concurrent parts. The coordinator's services
# and reactors (coordinator_*_test) pass their messages and reactors between
# gRPC's threads through Debian's uninstrumented libgrpc; the tree tells TSan
# of gRPC's locks and completion queues (tests/sanitizers/tsan_absl_sync.cc,
# tsan_grpc_cq.cc; docs/testing.md, "Sanitizers").
tsan_tests=(store_writer_test store_lease_test lease_queue_test periodic_thread_test
  worker_daemon_test store_schema_test handler_pool_test
  coordinator_worker_test coordinator_client_test coordinator_retry_test
  coordinator_security_test coordinator_storage_test coordinator_progress_test
  coordinator_eval_test coordinator_trainer_task_test coordinator_fits_test
  coordinator_early_stop_test coordinator_adaptive_order_test)

# build <dir> <sanitizers> [targets...]: configures the tree once, builds
# (the log in <dir>/build.log, its end shown on failure).
build() {
  local dir=$1 sanitizers=$2
  shift 2
  # C++20 here, C++17 in the main tree: CI builds hlab in both standards (a
  # LibTorch >= 2.14 makes the main tree C++20 too, cmake/HlabTorch.cmake).
  if [[ ! -f "$dir/build.ninja" ]]; then
    cmake -S . -B "$dir" -G Ninja -DHLAB_SANITIZE="$sanitizers" \
      -DHLAB_CXX_STANDARD=20 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
      -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  else
    cmake "$dir" -DHLAB_CXX_STANDARD=20 >/dev/null
  fi
  local targets=()
  (($#)) && targets=(--target "$@")
  if ! cmake --build "$dir" -j "$jobs" "${targets[@]}" >"$dir/build.log" 2>&1; then
    tail -40 "$dir/build.log" >&2
    echo "sanitize.sh: the build of $dir failed (log $dir/build.log)" >&2
    exit 1
  fi
}

# run_tests <tree> <dir> <ctest arguments...>: ctest with the reports going
# to <dir>/reports/; fails on a failed test or on any report.
run_tests() {
  local tree=$1 dir=$2
  shift 2
  local reports
  reports=$(cd "$dir" && pwd)/reports
  rm -rf "$reports"
  mkdir -p "$reports"
  local status=0
  (cd "$dir" && ctest --output-on-failure --timeout 600 "$@") || status=$?
  if compgen -G "$reports/*" >/dev/null; then
    echo "sanitize.sh: $tree: sanitizer reports:" >&2
    for f in "$reports"/*; do
      echo "== $f" >&2
      cat "$f" >&2
    done
    status=1
  fi
  if ((status)); then
    echo "sanitize.sh: $tree FAILED" >&2
    return 1
  fi
  echo "sanitize.sh: $tree: no sanitizer report"
}

failed=()
for tree in "${trees[@]}"; do
  case $tree in
    asan)
      dir=${HLAB_ASAN_BUILD_DIR:-build-asan}
      build "$dir" address,undefined
      out=$(cd "$dir" && pwd)/reports/report
      ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_init_order=1:log_path=$out \
      LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0 \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$out \
        run_tests asan "$dir" -E "^($(IFS='|'; echo "${asan_skip[*]}"))\$" "$@" \
        || failed+=(asan)
      ;;
    tsan)
      dir=${HLAB_TSAN_BUILD_DIR:-build-tsan}
      build "$dir" thread "${tsan_tests[@]}"
      out=$(cd "$dir" && pwd)/reports/report
      regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$supp/tsan.supp:log_path=$out \
        run_tests tsan "$dir" -R "$regex" "$@" || failed+=(tsan)
      ;;
  esac
done
if ((${#failed[@]})); then
  echo "sanitize.sh: failed: ${failed[*]}" >&2
  exit 1
fi
