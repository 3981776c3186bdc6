#!/usr/bin/env bash
# Installs hlab's build dependencies from Debian packages and builds the
# project (Release) into build/. Idempotent: when everything is installed and
# built it only runs an incremental build (seconds).
#
#   scripts/setup.sh            # deps + build
#   HLAB_WERROR=OFF scripts/setup.sh  # let warnings through (other compilers)
#   scripts/setup.sh --print-packages  # the Debian packages, one a line
#   scripts/setup.sh --deps-only       # install them, do not build
#
# The Dockerfiles in deploy/docker/ run this script, so the image installs
# exactly these packages (deploy_static_test checks it).
#
# Environment:
#   HLAB_BUILD_DIR   build directory (default: build)
#   HLAB_WERROR      OFF to let warnings through (default ON: the supported
#                    toolchain is Debian 12's GCC 12, and the demo and test
#                    commands share one configuration, so neither rebuilds
#                    the other's build)
#   HLAB_JOBS        parallel compile jobs (default: nproc)
#   HLAB_CMAKE_ARGS  extra arguments for the first configure, e.g.
#                    "-DCMAKE_PREFIX_PATH=/opt/libtorch" (a CUDA LibTorch)
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages hlab builds against. See docs/dependencies.md for why each
# is here.
packages=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libtorch-dev libopenblas0-pthread libjemalloc-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libsqlite3-dev sqlite3
  libgtest-dev libgmock-dev nlohmann-json3-dev libceres-dev libeigen3-dev
  libyaml-cpp-dev libsentencepiece-dev zlib1g-dev libssl-dev gnuplot-nox
  libgloo-dev openssl prometheus
  python3 python3-torch python3-scipy
)

if [[ "${1:-}" == "--print-packages" ]]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages and not root; run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "${1:-}" == "--deps-only" ]]; then
  exit 0
fi

# LibTorch uses whatever libblas.so.3 alternative is selected; OpenBLAS
# (pthread) is ~2x faster than ATLAS or the reference BLAS for sgemm.
blas_alt=libblas.so.3-$(gcc -dumpmachine)
if update-alternatives --query "$blas_alt" >/dev/null 2>&1; then
  current=$(update-alternatives --query "$blas_alt" | awk '/^Value:/{print $2}')
  if [[ "$current" != *openblas* ]]; then
    openblas=$(update-alternatives --query "$blas_alt" | awk '/^Alternative:/{print $2}' | grep openblas | head -1 || true)
    if [[ -n "$openblas" && $(id -u) -eq 0 ]]; then
      update-alternatives --set "$blas_alt" "$openblas" >/dev/null
    else
      echo "setup: warning: libblas.so.3 is $current, not OpenBLAS; LibTorch will be slower" >&2
    fi
  fi
fi

build_dir=${HLAB_BUILD_DIR:-build}
jobs=${HLAB_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths under the checkout hash as relative, so clones share cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}

read -r -a extra_cmake_args <<<"${HLAB_CMAKE_ARGS:-}"
if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -S . -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DHLAB_WERROR="${HLAB_WERROR:-ON}" "${extra_cmake_args[@]}" >/dev/null
else
  cmake "$build_dir" -DHLAB_WERROR="${HLAB_WERROR:-ON}" >/dev/null
fi
cmake --build "$build_dir" -j "$jobs"
