// A parsed YAML or JSON document as a small tree with source positions, so
// one reader (proto_reader.h) can fill protos from either syntax and name
// the line and column of every mistake.
//
// Thread-compatible plain data.
//
//   HLAB_ASSIGN_OR_RETURN(DocNode root, ParseYamlDocument(text));
//   for (const auto& [key, value] : root.entries) { ... }
#ifndef HLAB_COORDINATOR_SWEEP_INTERNAL_DOCUMENT_H_
#define HLAB_COORDINATOR_SWEEP_INTERNAL_DOCUMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::sweep::internal {

struct DocNode {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  // Scalars: the text as written ("1e-3", "true", "S1"). `quoted` is true
  // for YAML quoted scalars and JSON strings, which never read as numbers
  // or booleans.
  std::string scalar;
  bool quoted = false;
  std::vector<DocNode> items;                            // kList
  std::vector<std::pair<std::string, DocNode>> entries;  // kMap, in order
  // 1-based source position; 0 when unknown (JSON values).
  int line = 0;
  int column = 0;
};

// "list", "map", "null", "scalar".
const char* DocKindName(DocNode::Kind kind);

// " (line 3, column 5)", or "" when the position is unknown.
std::string Where(const DocNode& node);

// YAML 1.2 (yaml-cpp). InvalidArgument with line and column for malformed
// text, duplicate keys, non-scalar keys, anchors/aliases are allowed.
absl::StatusOr<DocNode> ParseYamlDocument(absl::string_view text);

// JSON (nlohmann). InvalidArgument with line and column for malformed text
// and duplicate keys.
absl::StatusOr<DocNode> ParseJsonDocument(absl::string_view text);

}  // namespace hlab::sweep::internal

#endif  // HLAB_COORDINATOR_SWEEP_INTERNAL_DOCUMENT_H_
