#!/usr/bin/env bash
# The libFuzzer targets of hlab's parsers (tests/fuzz/, docs/testing.md):
# builds them with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# into build-fuzz/, and runs each over its committed corpus
# (tests/fuzz/corpus/<target>/, read only: new inputs go to a scratch
# directory). A crash, leak or sanitizer report fails the script and leaves
# the input in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh                      # every target, 15 s each (CI)
#   scripts/fuzz.sh --seconds 60         # longer
#   scripts/fuzz.sh --runs 1000000       # a number of executions each
#   scripts/fuzz.sh sweep_spec task_file # some targets
#
# Environment: HLAB_FUZZ_BUILD_DIR (default build-fuzz), HLAB_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=15
runs=""
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(sweep_spec task_file trainer_record tokens_file checkpoint_header
     shard_manifest hf_tokenizer key_spans llama_files)
((${#targets[@]})) || targets=("${all[@]}")

for p in clang-14 libclang-rt-14-dev; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "fuzz.sh: installing $p" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null; }
  fi
done

build=${HLAB_FUZZ_BUILD_DIR:-build-fuzz}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# RelWithDebInfo: with debug info ccache hashes the working directory unless
# told not to, and a fresh clone elsewhere would miss every entry (as in
# scripts/sanitize.sh).
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DHLAB_FUZZ=ON -DHLAB_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
fi
cmake --build "$build" -j "${HLAB_JOBS:-$(nproc)}" \
  --target "${targets[@]/#/fuzz_}" >/dev/null

mkdir -p "$build/artifacts"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for t in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$t
  scratch=$build/corpus/$t
  mkdir -p "$scratch"
  limit=(-max_total_time="$seconds")
  [[ -n "$runs" ]] && limit=(-runs="$runs")
  log=$build/fuzz_$t.log
  if "$build/fuzz/fuzz_$t" "$scratch" "$corpus" "${limit[@]}" -max_len=8192 \
       -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/$t-" \
       -print_final_stats=1 >"$log" 2>&1; then
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    echo "fuzz $t: ok, ${execs:-?} executions"
  else
    echo "fuzz $t: FAILED (log $log, input in $build/artifacts/):" >&2
    tail -30 "$log" >&2
    failed+=("$t")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: ${#failed[@]} failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, no crash"
