#!/usr/bin/env bash
# One-shot GPU check: on a machine with a GPU, CUDA, a pip PyTorch (a CUDA
# LibTorch), CMake and ninja, and none of hlab's Debian packages, it builds
# the LibTorch side of hlab (hlab-train, hlab-eval, hlab-bench-gpu and the
# CUDA tests; -DHLAB_TRAINER_ONLY=ON) against that LibTorch and checks it:
#
#   1. the environment (GPU, driver, CUDA, LibTorch, compilers), printed
#   2. the build's dependencies: abseil, nlohmann-json, OpenSSL, zlib and
#      GoogleTest, from apt where it works, else from Debian packages
#      brought along (--deps DIR, made by --fetch-deps DIR on a machine with
#      apt), unpacked into a private prefix, never into /
#   3. the build (every compile error and warning is kept in the log)
#   4. hlab-train --probe-devices lists the GPU
#   5. tests/cuda_kernels_test: the GPU kernels (FlashAttention with the
#      sink folded in, GDN's scan in a CUDA graph, the LM head's loss in
#      blocks of rows) against their references; tests/cuda_train_test:
#      every architecture trains a few steps on the CPU and on CUDA with the
#      same losses (fp32 within 1e-4, bf16 within 2e-2); exact resume on
#      CUDA; a CUDA checkpoint evaluated on the CPU
#   6. hlab-bench-gpu: every architecture at T=16384, d_model 1024, 4 layers,
#      bf16, with device memory; full attention against LibTorch's SDPA; each
#      mixer as one layer; the attention core against raw FlashAttention-2;
#      then the training step alone at paper.yaml's largest scale (S5, 0.49B)
#      for its MFU
#   7. one JSON summary, OUT/gpu-check.json, with each step's outcome
#
#   scripts/gpu-check.sh [--out DIR] [--deps DIR] [--jobs N]
#                        [--bench-seconds S | --skip-bench]
#   scripts/gpu-check.sh --fetch-deps DIR   # download the .debs (needs apt)
#
# Without a GPU it stops before the build and says so (exit 3). It aims to
# finish within 9 minutes on one H200 with 16 cores; each step has its own
# time limit, and a failed step does not stop the later ones that can run.
# docs/training.md ("Building for GPUs") explains each check.
set -uo pipefail
cd "$(dirname "$0")/.."

out=${OUT:-gpu-check-out}
deps_dir=""
jobs=$(nproc)
bench_seconds=200
s5_seconds=60
test_filter='*'
deb_packages=(libabsl-dev libabsl20220623 nlohmann-json3-dev libssl-dev
  libssl3 zlib1g-dev zlib1g libgtest-dev)

while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --deps) deps_dir=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --bench-seconds) bench_seconds=$2; shift 2 ;;
    --skip-bench) bench_seconds=-1; shift ;;
    --test-filter) test_filter=$2; shift 2 ;;
    --fetch-deps)
      mkdir -p "$2" && cd "$2" || exit 1
      apt-get download "${deb_packages[@]}" || {
        echo "gpu-check: apt-get download failed; run 'apt-get update' first" >&2
        exit 1
      }
      ls -l
      exit 0 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/gpu-check.log"
: >"$log"
summary_steps=()
start_all=$(date +%s)

say() { echo "gpu-check: $*" | tee -a "$log"; }
# step NAME STATUS DETAIL: one entry of the summary.
step() {
  local detail=${3//\\/\\\\}
  detail=${detail//\"/\\\"}
  summary_steps+=("{\"step\": \"$1\", \"status\": \"$2\", \"detail\": \"$detail\", \"at_s\": $(($(date +%s) - start_all))}")
  say "[$2] $1: $3"
}
write_summary() {
  {
    echo "{\"steps\": ["
    local first=1
    for s in "${summary_steps[@]}"; do
      ((first)) || echo ","
      first=0
      echo "  $s"
    done
    echo "], \"seconds\": $(($(date +%s) - start_all))}"
  } >"$out/gpu-check.json"
  say "summary in $out/gpu-check.json"
}
trap write_summary EXIT

# 1. The environment.
{
  echo "== $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  command -v nvcc >/dev/null && nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' 2>&1
  cmake --version | head -1; ninja --version; c++ --version | head -1
  ldd --version | head -1
} 2>&1 | tee -a "$log"

# HLAB_TORCH_PREFIX: a LibTorch of your own (the directory CMake searches,
# e.g. libtorch/share/cmake); else the one of python3's torch.
torch_prefix=${HLAB_TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)}
if [[ -n "${HLAB_TORCH_PREFIX:-}" ]]; then
  has_cuda=$(nvidia-smi -L >/dev/null 2>&1 && echo 1)
else
  has_cuda=$(python3 -c 'import torch; print(int(torch.cuda.is_available() and torch.version.cuda is not None))' 2>/dev/null)
fi
if [[ -z "$torch_prefix" ]]; then
  step environment fail "no LibTorch: python3 has no torch and HLAB_TORCH_PREFIX is unset; install a CUDA PyTorch (pip install torch) or set HLAB_TORCH_PREFIX. The GPU steps were not run"
  exit 3
fi
if [[ "$has_cuda" != 1 ]] || ! command -v nvidia-smi >/dev/null; then
  step environment fail "no CUDA device here (nvidia-smi or torch.cuda.is_available() says none): the GPU steps need one; run this on a GPU machine"
  exit 3
fi
step environment ok "LibTorch at $torch_prefix"

# 2. Dependencies: apt where it works, else the brought .debs.
prefix_path="$torch_prefix"
cmake_extra=()
if dpkg-query -W libabsl-dev nlohmann-json3-dev libssl-dev zlib1g-dev libgtest-dev >/dev/null 2>&1; then
  step dependencies ok "installed Debian packages"
elif timeout 120 apt-get install -y -qq --no-install-recommends libabsl-dev nlohmann-json3-dev libssl-dev zlib1g-dev libgtest-dev >>"$log" 2>&1; then
  step dependencies ok "installed from apt"
elif [[ -n "$deps_dir" ]] && compgen -G "$deps_dir/*.deb" >/dev/null; then
  deps_prefix=/tmp/hlab-deps
  rm -rf "$deps_prefix" && mkdir -p "$deps_prefix"
  for deb in "$deps_dir"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$deps_prefix"
    else
      (cd "$(mktemp -d)" && ar x "$deb" && tar -xf data.tar.* -C "$deps_prefix")
    fi
  done
  libdir=$(dirname "$(find "$deps_prefix" -name 'libabsl_base.so' | head -1)")
  prefix_path="$torch_prefix;$deps_prefix/usr"
  cmake_extra+=(-DOPENSSL_ROOT_DIR="$deps_prefix/usr"
    -DZLIB_ROOT="$deps_prefix/usr")
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step dependencies ok "unpacked $(ls "$deps_dir"/*.deb | wc -l) Debian packages from $deps_dir into $deps_prefix"
else
  step dependencies fail "abseil, nlohmann-json, OpenSSL, zlib and GoogleTest are missing, apt cannot install them, and no --deps DIR of .debs was given (make one with --fetch-deps DIR where apt works)"
  exit 1
fi

# 3. The build.
build=build-gpu
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$(python3 -c 'import torch; c=torch.cuda.get_device_capability(); print(f"{c[0]}.{c[1]}")' 2>/dev/null)}
configure_start=$(date +%s)
if ! timeout 300 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DHLAB_TRAINER_ONLY=ON -DHLAB_WERROR=OFF \
    -DCMAKE_PREFIX_PATH="$prefix_path" "${cmake_extra[@]}" \
    >"$out/configure.log" 2>&1; then
  step configure fail "cmake failed: $(grep -m3 -A3 'Error' "$out/configure.log" | tr '\n' ' ' | cut -c1-600)"
  exit 1
fi
step configure ok "$(grep -E 'hlab: (LibTorch|building as)' "$out/configure.log" | sed 's/^-- //' | tr '\n' ' ')in $(($(date +%s) - configure_start)) s"
build_start=$(date +%s)
targets=(hlab-train hlab-eval cuda_train_test cuda_kernels_test)
((bench_seconds >= 0)) && targets+=(hlab-bench-gpu)
timeout 420 cmake --build "$build" -j "$jobs" -- -k 0 "${targets[@]}" \
  >"$out/build.log" 2>&1
build_rc=$?
errors=$(grep -c 'error:' "$out/build.log")
warnings=$(grep -c 'warning:' "$out/build.log")
grep -E 'error:|warning:' "$out/build.log" | sort | uniq -c | sort -rn | head -40 >"$out/build-diagnostics.txt"
if ((build_rc != 0)); then
  # The steps below still run where their program was built.
  step build fail "rc $build_rc, $errors errors, $warnings warnings in $(($(date +%s) - build_start)) s; first: $(grep -m1 'error:' "$out/build.log" | cut -c1-400)"
else
  step build ok "$warnings warnings in $(($(date +%s) - build_start)) s (build-diagnostics.txt)"
fi
# built PROGRAM: whether the build made it (else the step is skipped).
built() {
  [[ -x "$build/$2" ]] && return 0
  step "$1" skipped "$2 was not built"
  return 1
}

# 4. The device probe.
built probe bin/hlab-train && {
probe=$(timeout 60 "$build/bin/hlab-train" --probe-devices 2>&1)
echo "$probe" >"$out/probe.json"
if echo "$probe" | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["cuda_build"] and j["cuda"] else 1)' 2>/dev/null; then
  step probe ok "$probe"
else
  step probe fail "hlab-train --probe-devices: $probe"
fi
}

# 4b. hlab-train end to end on CUDA: its example task (swa-32, 100 steps,
# validation every 25) with "device": "cuda" and bf16, checkpoints on.
built train_cli bin/hlab-train && {
mkdir -p "$out/train-cli"
"$build/bin/hlab-train" --example-task | python3 -c '
import json, sys
t = json.load(sys.stdin)
t.update(device="cuda", bf16=True)
t["checkpoint"]["dir"] = sys.argv[1]
print(json.dumps(t))' "$out/train-cli/checkpoints" >"$out/train-cli/task.json"
train_start=$(date +%s)
timeout 180 "$build/bin/hlab-train" --task "$out/train-cli/task.json" \
  >"$out/train-cli/train.log" 2>&1
rc=$?
if ((rc == 0)); then
  step train_cli ok "example task on CUDA in $(($(date +%s) - train_start)) s: $(grep -i 'loss' "$out/train-cli/train.log" | tail -1 | cut -c1-200)"
else
  step train_cli fail "rc $rc: $(tail -3 "$out/train-cli/train.log" | tr '\n' ' ' | cut -c1-400)"
fi
}

# 5. The tests that need a device: cuda_train_test (CUDA against the CPU,
# resume, checkpoint read on the CPU) and cuda_kernels_test (the GPU kernels
# against their references). Each binary runs whole once; if it crashes, one
# process per test (a crash then costs one test), with the first crash rerun
# under cuda-gdb (where the image has it) for the stack in the log.
run_device_tests() {
local name=$1 test_bin="$build/tests/$1"
timeout 240 "$test_bin" --gtest_filter="$test_filter" \
  --gtest_output="json:$out/$name.json" >"$out/$name.log" 2>&1
local rc=$?
local passed failed crashed failures
passed=$(grep -c '^\[       OK \]' "$out/$name.log")
failures=$(grep '^\[  FAILED  \] [A-Za-z]' "$out/$name.log" | sed 's/^\[  FAILED  \] //; s/, where .*//; s/ (.*//' | sort -u | tr '\n' ' ')
if ((rc >= 128 || rc == 124)); then
  passed=0 failed=0 crashed=0 failures=""
  for t in $("$test_bin" --gtest_list_tests --gtest_filter="$test_filter" | awk '/^[^ ]/{suite=$1} /^  /{print suite $1}'); do
    timeout 120 "$test_bin" --gtest_filter="$t" >>"$out/$name.log" 2>&1
    rc=$?
    if ((rc == 0)); then
      passed=$((passed + 1))
    elif ((rc >= 128 || rc == 124)); then
      crashed=$((crashed + 1))
      failures+="$t (rc $rc) "
      if ((crashed == 1)) && command -v cuda-gdb >/dev/null; then
        # The stack's words, symbolised: the callers even where the crash
        # left no frame to unwind (a jump to address 0).
        timeout 120 cuda-gdb -q -batch -ex run -ex bt -ex 'x/48a $sp' \
          -ex 'info sharedlibrary' --args "$test_bin" --gtest_filter="$t" \
          >"$out/$name-crash-backtrace.txt" 2>&1
      fi
    else
      failed=$((failed + 1))
      failures+="$t "
    fi
  done
  step "$name" fail "$passed passed, $failed failed, $crashed crashed: $failures"
elif ((rc == 0)); then
  step "$name" ok "$passed passed"
else
  step "$name" fail "rc $rc, $passed passed; failed: $failures"
fi
}
built cuda_kernels_test tests/cuda_kernels_test && run_device_tests cuda_kernels_test
built cuda_train_test tests/cuda_train_test && run_device_tests cuda_train_test

# 6. Speed and memory at the paper's long shape.
if ((bench_seconds < 0)); then
  step bench skipped "--skip-bench"
else
built bench bin/hlab-bench-gpu && {
timeout $((bench_seconds + 120)) "$build/bin/hlab-bench-gpu" \
  --max-seconds "$bench_seconds" --json "$out/bench-gpu.json" \
  >"$out/bench-gpu.log" 2>&1
bench_rc=$?
if ((bench_rc == 0)); then
  step bench ok "$(grep -v '^{' "$out/bench-gpu.log" | tr '\n' ';' | cut -c1-800)"
else
  step bench fail "rc $bench_rc: $(tail -5 "$out/bench-gpu.log" | tr '\n' ' ' | cut -c1-600)"
fi
}
# 6b. MFU at the largest scale of examples/sweeps/paper.yaml (S5: d_model
# 1408, 24 layers, 22 heads of 64, 2 kv heads, Llama 3's vocabulary; N =
# 0.49B) at the same context: the training step alone.
built bench_s5 bin/hlab-bench-gpu && {
timeout $((s5_seconds + 150)) "$build/bin/hlab-bench-gpu" --sections training \
  --d-model 1408 --layers 24 --heads 22 --kv-heads 2 --vocab 128256 \
  --max-seconds "$s5_seconds" --json "$out/bench-gpu-s5.json" \
  >"$out/bench-gpu-s5.log" 2>&1
bench_rc=$?
if ((bench_rc == 0)); then
  step bench_s5 ok "$(grep -v '^{' "$out/bench-gpu-s5.log" | tr '\n' ';' | cut -c1-800)"
else
  step bench_s5 fail "rc $bench_rc: $(tail -5 "$out/bench-gpu-s5.log" | tr '\n' ' ' | cut -c1-600)"
fi
}
fi
