#include "coordinator/sweep/spec_parser.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/sweep/internal/document.h"
#include "coordinator/sweep/internal/proto_reader.h"

namespace hlab::sweep {

namespace {

// The first empty list of the document, as "<path>: empty list ...".
absl::Status RefuseEmptyLists(const internal::DocNode& node,
                              const std::string& path) {
  using Kind = internal::DocNode::Kind;
  if (node.kind == Kind::kList) {
    if (node.items.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path.empty() ? "spec" : path, ": empty list", internal::Where(node),
          "; remove the key for its default, or list at least one value"));
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      HLAB_RETURN_IF_ERROR(
          RefuseEmptyLists(node.items[i], absl::StrCat(path, "[", i, "]")));
    }
  } else if (node.kind == Kind::kMap) {
    for (const internal::DocEntry& entry : node.entries) {
      HLAB_RETURN_IF_ERROR(RefuseEmptyLists(
          entry.value,
          path.empty() ? entry.key : absl::StrCat(path, ".", entry.key)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<hlab::v1::SweepSpec> ParseSweepSpec(absl::string_view text,
                                                   SpecFormat format) {
  if (format == SpecFormat::kAuto) {
    const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(text);
    format =
        absl::StartsWith(stripped, "{") ? SpecFormat::kJson : SpecFormat::kYaml;
  }
  internal::DocNode root;
  if (format == SpecFormat::kJson) {
    HLAB_ASSIGN_OR_RETURN(root, internal::ParseJsonDocument(text));
  } else {
    HLAB_ASSIGN_OR_RETURN(root, internal::ParseYamlDocument(text));
  }
  if (root.kind == internal::DocNode::Kind::kNull) {
    return absl::InvalidArgumentError(
        "spec: the document is empty; see examples/sweeps/demo.yaml");
  }
  hlab::v1::SweepSpec spec;
  HLAB_RETURN_IF_ERROR(internal::ReadMessage(root, "", &spec));
  // JSON is the form hlab prints, with [] for every unset list; YAML is
  // what people write, where [] would silently mean the default.
  if (format == SpecFormat::kYaml) {
    HLAB_RETURN_IF_ERROR(RefuseEmptyLists(root, ""));
  }
  return spec;
}

absl::StatusOr<hlab::v1::SweepSpec> LoadSweepSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no such file; check the path"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot read: ", std::strerror(err)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const SpecFormat format =
      absl::EndsWith(path, ".json") ? SpecFormat::kJson : SpecFormat::kAuto;
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      ParseSweepSpec(buffer.str(), format);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

std::string SweepSpecToCanonicalJson(const hlab::v1::SweepSpec& spec) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  // Printing a valid message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(spec, &out, options);
  return out;
}

}  // namespace hlab::sweep
