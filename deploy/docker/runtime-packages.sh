#!/usr/bin/env bash
# Prints the Debian packages that own the shared libraries the given
# binaries load (ldd), one a line, for an image's runtime stage. Libraries
# under /opt (a downloaded LibTorch, copied into the image as is) and ones
# ldd cannot find (the NVIDIA driver's libcuda, mounted at run time) are
# skipped; any other library no package owns is an error.
#
#   deploy/docker/runtime-packages.sh /opt/hlab/bin/* > runtime-packages.txt
set -euo pipefail
(($#)) || { echo "usage: $0 BINARY..." >&2; exit 2; }
mapfile -t libs < <(ldd "$@" | awk '/=> \// {print $3}' | grep -v '^/opt/' | sort -u)
((${#libs[@]})) || exit 0
# dpkg knows a library under one of its names: as ldd prints it, resolved,
# or under /usr (merged /usr). One dpkg -S call for all candidates.
declare -A candidates=()
for lib in "${libs[@]}"; do
  real=$(readlink -f "$lib")
  for c in "$lib" "$real" "/usr$lib" "/usr$real"; do candidates["$c"]=1; done
done
declare -A owner=()
while IFS= read -r line; do
  # "libfoo1:amd64: /usr/lib/x86_64-linux-gnu/libfoo.so.1"
  path=${line##*: }
  owner["$path"]=${line%%:*}
done < <(dpkg -S "${!candidates[@]}" 2>/dev/null || true)
for lib in "${libs[@]}"; do
  real=$(readlink -f "$lib")
  found=""
  for c in "$lib" "$real" "/usr$lib" "/usr$real"; do
    if [[ -n "${owner[$c]:-}" ]]; then found=${owner[$c]}; break; fi
  done
  if [[ -z "$found" ]]; then
    echo "runtime-packages: no Debian package owns $lib" >&2
    exit 1
  fi
  echo "$found"
done | sort -u
