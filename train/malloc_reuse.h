// Keeps the memory a training process frees for its own next allocations,
// instead of handing it back to the kernel after every step.
//
// Why: glibc's malloc serves large blocks with mmap and unmaps them on free,
// and trims the free top of its heap. A training step frees and allocates
// the same activations every step, so each step faulted them in again as
// fresh zeroed pages. The peak is reached every step anyway, so the memory
// kept is memory the next step uses. Measured: docs/performance.md,
// "Measurements behind defaults in code".
//
// Process-wide: call early in main, before other threads start. glibc only
// (a no-op elsewhere); a GLIBC_TUNABLES setting that names malloc wins.
//
//   int main(int argc, char** argv) {
//     hlab::train::KeepFreedMemoryForReuse();
//     ...
#ifndef HLAB_TRAIN_MALLOC_REUSE_H_
#define HLAB_TRAIN_MALLOC_REUSE_H_

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hlab::train {

inline void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "malloc") != nullptr) {
    return;
  }
  mallopt(M_MMAP_MAX, 0);  // large blocks from the heap too
  // Never trim the heap's top. -1 (documented in mallopt(3)) is the only
  // way past mallopt's int: 0x7fffffff still trimmed any free top over
  // 2 GiB, and a 128K-token vocabulary's logits free 4 GiB every step.
  mallopt(M_TRIM_THRESHOLD, -1);
  mallopt(M_TOP_PAD, 64 << 20);  // grow the heap 64 MiB at a time
#endif
}

}  // namespace hlab::train

#endif  // HLAB_TRAIN_MALLOC_REUSE_H_
