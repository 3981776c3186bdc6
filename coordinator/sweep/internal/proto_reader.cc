#include "coordinator/sweep/internal/proto_reader.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace hlab::sweep::internal {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

// "<path>: <what> (line L, column C)[; <hint>]".
absl::Status Error(const std::string& path, const DocNode& node,
                   const std::string& what, const std::string& hint = "") {
  return absl::InvalidArgumentError(
      absl::StrCat(path.empty() ? "spec" : path, ": ", what, Where(node),
                   hint.empty() ? "" : "; ", hint));
}

std::string Shown(const DocNode& node) {
  if (node.kind == DocNode::Kind::kScalar) {
    return absl::StrCat("'", node.scalar, "'");
  }
  return absl::StrCat("a ", DocKindName(node.kind));
}

// Scalar readers. Numbers may be quoted, as in protobuf's JSON mapping
// (which prints 64-bit integers as strings), so printed specs read back;
// booleans must be plain true/false.
absl::StatusOr<int64_t> ReadInt(const DocNode& node, const std::string& path,
                                int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (node.kind != DocNode::Kind::kScalar ||
      !absl::SimpleAtoi(node.scalar, &v)) {
    // Accept integral floats written as 1e6 or 1000000.0.
    double d = 0;
    if (node.kind == DocNode::Kind::kScalar &&
        absl::SimpleAtod(node.scalar, &d) && std::isfinite(d) &&
        d == std::floor(d) && std::fabs(d) < 9.0e18) {
      v = static_cast<int64_t>(d);
    } else {
      return Error(path, node,
                   absl::StrCat("expected an integer, got ", Shown(node)));
    }
  }
  if (v < lo || v > hi) {
    return Error(
        path, node,
        absl::StrCat("integer ", v, " out of range [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<double> ReadDouble(const DocNode& node,
                                  const std::string& path) {
  double v = 0;
  if (node.kind != DocNode::Kind::kScalar ||
      !absl::SimpleAtod(node.scalar, &v) || !std::isfinite(v)) {
    return Error(path, node,
                 absl::StrCat("expected a finite number, got ", Shown(node)));
  }
  return v;
}

absl::StatusOr<bool> ReadBool(const DocNode& node, const std::string& path) {
  if (node.kind == DocNode::Kind::kScalar && !node.quoted) {
    if (node.scalar == "true") return true;
    if (node.scalar == "false") return false;
  }
  return Error(path, node,
               absl::StrCat("expected true or false, got ", Shown(node)));
}

absl::StatusOr<std::string> ReadString(const DocNode& node,
                                       const std::string& path) {
  if (node.kind != DocNode::Kind::kScalar) {
    return Error(path, node,
                 absl::StrCat("expected a string, got ", Shown(node)));
  }
  return node.scalar;
}

// Sets (or adds, for repeated fields) one scalar or enum value.
absl::Status ReadScalarField(const DocNode& node, const std::string& path,
                             const FieldDescriptor* field, Message* message) {
  const Reflection* r = message->GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      HLAB_ASSIGN_OR_RETURN(
          int64_t v, ReadInt(node, path, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max()));
      rep ? r->AddInt32(message, field, static_cast<int32_t>(v))
          : r->SetInt32(message, field, static_cast<int32_t>(v));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      HLAB_ASSIGN_OR_RETURN(
          int64_t v, ReadInt(node, path, std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max()));
      rep ? r->AddInt64(message, field, v) : r->SetInt64(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      HLAB_ASSIGN_OR_RETURN(
          int64_t v,
          ReadInt(node, path, 0,
                  field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
                      ? std::numeric_limits<uint32_t>::max()
                      : std::numeric_limits<int64_t>::max()));
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
        rep ? r->AddUInt32(message, field, static_cast<uint32_t>(v))
            : r->SetUInt32(message, field, static_cast<uint32_t>(v));
      } else {
        rep ? r->AddUInt64(message, field, static_cast<uint64_t>(v))
            : r->SetUInt64(message, field, static_cast<uint64_t>(v));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      HLAB_ASSIGN_OR_RETURN(double v, ReadDouble(node, path));
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        rep ? r->AddDouble(message, field, v) : r->SetDouble(message, field, v);
      } else {
        rep ? r->AddFloat(message, field, static_cast<float>(v))
            : r->SetFloat(message, field, static_cast<float>(v));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      HLAB_ASSIGN_OR_RETURN(bool v, ReadBool(node, path));
      rep ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      HLAB_ASSIGN_OR_RETURN(std::string v, ReadString(node, path));
      rep ? r->AddString(message, field, v) : r->SetString(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      HLAB_ASSIGN_OR_RETURN(std::string v, ReadString(node, path));
      const auto* value = field->enum_type()->FindValueByName(v);
      if (value == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < field->enum_type()->value_count(); ++i) {
          names.push_back(field->enum_type()->value(i)->name());
        }
        return Error(path, node,
                     absl::StrCat("unknown value '", v, "'; expected one of: ",
                                  absl::StrJoin(names, ", ")));
      }
      rep ? r->AddEnum(message, field, value)
          : r->SetEnum(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return Error(path, node, "internal: not a scalar field");
}

absl::Status ReadField(const DocNode& node, const std::string& path,
                       const FieldDescriptor* field, Message* message) {
  if (node.kind == DocNode::Kind::kNull) {
    return Error(path, node, "missing value (remove the key or give a value)");
  }
  if (field->is_repeated()) {
    if (node.kind != DocNode::Kind::kList) {
      return Error(path, node,
                   absl::StrCat("expected a list, got ", Shown(node),
                                " (write [value] for a single value)"));
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string item_path = absl::StrCat(path, "[", i, "]");
      const DocNode& item = node.items[i];
      if (item.kind == DocNode::Kind::kNull) {
        return Error(item_path, item, "missing value");
      }
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Message* child = message->GetReflection()->AddMessage(message, field);
        HLAB_RETURN_IF_ERROR(ReadMessage(item, item_path, child));
      } else {
        HLAB_RETURN_IF_ERROR(ReadScalarField(item, item_path, field, message));
      }
    }
    return absl::OkStatus();
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    Message* child = message->GetReflection()->MutableMessage(message, field);
    return ReadMessage(node, path, child);
  }
  return ReadScalarField(node, path, field, message);
}

// Messages that may be written as a bare name: `- swa-128` for
// `- {name: swa-128}`. Only where a name alone is a complete value.
bool AllowsNameShorthand(const Descriptor* d) {
  return d->full_name() == "hlab.v1.Architecture";
}

std::string KnownFields(const Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i)
    names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Status ReadMessage(const DocNode& node, const std::string& path,
                         Message* message) {
  const Descriptor* d = message->GetDescriptor();
  if (node.kind == DocNode::Kind::kScalar && AllowsNameShorthand(d)) {
    const FieldDescriptor* name = d->FindFieldByName("name");
    if (name != nullptr && !name->is_repeated() &&
        name->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      message->GetReflection()->SetString(message, name, node.scalar);
      return absl::OkStatus();
    }
  }
  if (node.kind != DocNode::Kind::kMap) {
    return Error(path, node, absl::StrCat("expected a map, got ", Shown(node)));
  }
  for (const DocEntry& entry : node.entries) {
    const std::string& key = entry.key;
    const DocNode& value = entry.value;
    const std::string child_path = Join(path, key);
    const FieldDescriptor* field = d->FindFieldByName(key);
    if (field == nullptr) {
      DocNode at_key;
      at_key.line = entry.line;
      at_key.column = entry.column;
      return Error(child_path, at_key, "unknown field",
                   absl::StrCat("known fields: ", KnownFields(d)));
    }
    const auto* oneof = field->real_containing_oneof();
    if (oneof != nullptr) {
      const FieldDescriptor* set =
          message->GetReflection()->GetOneofFieldDescriptor(*message, oneof);
      if (set != nullptr) {
        return Error(child_path, value,
                     absl::StrCat("conflicts with '", set->name(),
                                  "': give only one of them"));
      }
    }
    HLAB_RETURN_IF_ERROR(ReadField(value, child_path, field, message));
  }
  return absl::OkStatus();
}

}  // namespace hlab::sweep::internal
