// train/malloc_reuse.h: memory a training step frees stays in the process
// for the next step, however large the block (a 128K-token vocabulary's
// logits free over 2 GiB at once).
#include "train/malloc_reuse.h"

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hlab::train {
namespace {

#if defined(__GLIBC__)
TEST(MallocReuseTest, AFreedBlockOverTwoGibStaysInTheHeap) {
  if (const char* t = std::getenv("GLIBC_TUNABLES");
      t != nullptr && std::strstr(t, "malloc") != nullptr) {
    GTEST_SKIP() << "GLIBC_TUNABLES sets malloc's limits here: " << t;
  }
  KeepFreedMemoryForReuse();
  // 3 GiB of address space from the heap; its pages are never touched, so
  // no memory is used.
  constexpr size_t kBlock = size_t{3} << 30;
  void* block = std::malloc(kBlock);
  ASSERT_NE(block, nullptr);
  const size_t heap_with_block = mallinfo2().arena;
  ASSERT_GE(heap_with_block, kBlock) << "the block did not come from the heap";
  std::free(block);
  EXPECT_GE(mallinfo2().arena, kBlock)
      << "free() gave the heap's top back to the kernel (" << heap_with_block
      << " -> " << mallinfo2().arena << " bytes): the next step faults it "
      << "in again";
}
#endif

}  // namespace
}  // namespace hlab::train
