// Fills a protobuf message from a DocNode tree (YAML or JSON), strictly:
// unknown keys, wrong types, out-of-range numbers and missing values are
// InvalidArgument errors naming the field path and source position, e.g.
//   "scales[1].d_modle: unknown field (line 9, column 5); known fields: ..."
//   "seq_len: expected an integer, got 'long' (line 4, column 10)"
//
// Keys are the proto field names. Enum fields take their value names.
// Numbers may be quoted ("64"), as protobuf's JSON mapping prints 64-bit
// integers; booleans must be plain true/false.
// Thread-safe (pure function).
//
//   hlab::v1::SweepSpec spec;
//   HLAB_RETURN_IF_ERROR(ReadMessage(root, "", &spec));
#ifndef HLAB_COORDINATOR_SWEEP_INTERNAL_PROTO_READER_H_
#define HLAB_COORDINATOR_SWEEP_INTERNAL_PROTO_READER_H_

#include <string>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "coordinator/sweep/internal/document.h"

namespace hlab::sweep::internal {

// Reads `node` into `message` (which should be empty). `path` is the field
// path of `node` for messages ("" at the root). A scalar given where an
// hlab.v1.Architecture is expected fills its `name`, so
// `architectures: [full, swa-128]` reads as [{name: full}, {name: swa-128}].
absl::Status ReadMessage(const DocNode& node, const std::string& path,
                         google::protobuf::Message* message);

}  // namespace hlab::sweep::internal

#endif  // HLAB_COORDINATOR_SWEEP_INTERNAL_PROTO_READER_H_
