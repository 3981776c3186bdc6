// A parsed YAML or JSON document as a small tree with source positions, so
// one reader (proto_reader.h) can fill protos from either syntax and name
// the line and column of every mistake.
//
// Thread-compatible plain data.
//
//   HLAB_ASSIGN_OR_RETURN(DocNode root, ParseYamlDocument(text));
//   for (const DocEntry& entry : root.entries) { ... entry.value ... }
#ifndef HLAB_COORDINATOR_SWEEP_INTERNAL_DOCUMENT_H_
#define HLAB_COORDINATOR_SWEEP_INTERNAL_DOCUMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::sweep::internal {

struct DocEntry;

struct DocNode {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  // Scalars: the text as written ("1e-3", "true", "S1"). `quoted` is true
  // for YAML quoted scalars and JSON strings, which never read as numbers
  // or booleans.
  std::string scalar;
  bool quoted = false;
  std::vector<DocNode> items;     // kList
  std::vector<DocEntry> entries;  // kMap, in document order
  // 1-based source position; 0 when unknown (JSON values).
  int line = 0;
  int column = 0;
};

// One key of a map and its value; the key keeps its own position, which
// "unknown field" errors point at.
struct DocEntry {
  std::string key;
  int line = 0;  // of the key; 0 when unknown
  int column = 0;
  DocNode value;
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
