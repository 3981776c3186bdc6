// The real definition behind an interposed function, for the TSan tree's
// interposers (tsan_absl_sync.cc, tsan_grpc_cq.cc): the definition that
// `symbol` has after this binary's, in the dynamic linker's lookup order
// (libabsl_synchronization's, libgrpc's). A symbol that is missing (another
// abseil or gRPC version) stops the process with a message naming it.
//
//   static const auto next = NextSymbol<decltype(&f)>("tsan_x", "f");
#ifndef HLAB_TESTS_SANITIZERS_TSAN_NEXT_SYMBOL_H_
#define HLAB_TESTS_SANITIZERS_TSAN_NEXT_SYMBOL_H_

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace hlab::tsan {

template <typename Fn>
Fn NextSymbol(const char* who, const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (f == nullptr) {
    std::fprintf(stderr, "%s: %s not found: %s\n", who, symbol, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace hlab::tsan

#endif  // HLAB_TESTS_SANITIZERS_TSAN_NEXT_SYMBOL_H_
