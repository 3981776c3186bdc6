// The demo sweep spec (examples/sweeps/demo.yaml), compiled into the binary
// so `hlab up` runs it with no files around.
//
// Thread-safe (immutable data).
//
//   HLAB_ASSIGN_OR_RETURN(hlab::v1::SweepSpec spec,
//                         ParseSweepSpec(EmbeddedDemoSpec()));
#ifndef HLAB_COORDINATOR_SWEEP_EMBEDDED_DEMO_H_
#define HLAB_COORDINATOR_SWEEP_EMBEDDED_DEMO_H_

#include "absl/strings/string_view.h"

namespace hlab::sweep {

// The YAML text of examples/sweeps/demo.yaml as of the build (CMake re-reads
// the file when it changes).
absl::string_view EmbeddedDemoSpec();

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_EMBEDDED_DEMO_H_
