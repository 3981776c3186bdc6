// LibTorchStatus: the absl::Status of an error LibTorch threw (c10::Error),
// for the training and evaluation loops that catch them at their top.
//
// An allocation failure ("out of memory", or the CPU allocator's
// "DefaultCPUAllocator" message) is ResourceExhausted "out of memory: ...",
// which the worker reports as a fault of the task's size; anything else is
// Internal "LibTorch error: ...". The message is LibTorch's without its
// backtrace. Errors that mean a bad file (a checkpoint that does not match
// its model) are the caller's to word, not this.
//
// Thread-safety: reentrant.
//
//   try {
//     return loop.Run();
//   } catch (const c10::Error& e) {
//     return LibTorchStatus(e);
//   }
#ifndef HLAB_TRAIN_LIBTORCH_STATUS_H_
#define HLAB_TRAIN_LIBTORCH_STATUS_H_

#include <c10/util/Exception.h>

#include "absl/status/status.h"

namespace hlab::train {

absl::Status LibTorchStatus(const c10::Error& error);

}  // namespace hlab::train

#endif  // HLAB_TRAIN_LIBTORCH_STATUS_H_
