// JsonObjectReader: reads the fields of one JSON object of a task file,
// naming every field by its path ("evals.longppl.alpha") in its errors. The
// one reader of hlab-train's and hlab-eval's task files and of model
// configs (model/config/model_config.cc).
//
// Get/GetList leave `out` unchanged when the key is absent (the default
// stays) and return InvalidArgument "PATH: must be an integer" (a number, a
// string, true or false, a list) when the value has the wrong type;
// CheckKeys refuses unknown fields, pointing at `help` ("hlab-eval --help").
//
// Thread-safety: a plain view of a JSON value; keep the value alive.
//
//   JsonObjectReader r(json, "evals.niah", "hlab-eval --help");
//   HLAB_RETURN_IF_ERROR(r.CheckKeys({"samples", "depths"}));
//   HLAB_RETURN_IF_ERROR(r.Get("samples", &spec.samples));
#ifndef HLAB_COMMON_JSON_READER_H_
#define HLAB_COMMON_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace hlab {

class JsonObjectReader {
 public:
  JsonObjectReader(const nlohmann::json& object, std::string where,
                   std::string help)
      : object_(object), where_(std::move(where)), help_(std::move(help)) {}

  std::string Path(absl::string_view key) const {
    return where_.empty() ? std::string(key) : absl::StrCat(where_, ".", key);
  }

  absl::Status CheckKeys(const std::set<std::string>& known) const {
    if (!object_.is_object()) {
      return Error(where_.empty() ? "task" : where_, "must be an object");
    }
    for (const auto& item : object_.items()) {
      if (known.count(item.key()) == 0) {
        return Error(Path(item.key()),
                     absl::StrCat("unknown field (see ", help_, ")"));
      }
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& key) const { return object_.contains(key); }
  const nlohmann::json& At(const std::string& key) const {
    return object_.at(key);
  }
  // A reader of the object at `key` (which must be present).
  JsonObjectReader Child(const std::string& key) const {
    return JsonObjectReader(object_.at(key), Path(key), help_);
  }

  template <typename T>
  absl::Status Get(const std::string& key, T* out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return absl::OkStatus();
    absl::Status typed = Check<T>(*it, Path(key));
    if (!typed.ok()) return typed;
    *out = it->template get<T>();
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status GetList(const std::string& key, std::vector<T>* out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return absl::OkStatus();
    if (!it->is_array()) return Error(Path(key), "must be a list");
    out->clear();
    for (size_t i = 0; i < it->size(); ++i) {
      absl::Status typed =
          Check<T>((*it)[i], absl::StrCat(Path(key), "[", i, "]"));
      if (!typed.ok()) return typed;
      out->push_back((*it)[i].template get<T>());
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status Error(absl::string_view field,
                            absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
  }

  template <typename T>
  static absl::Status Check(const nlohmann::json& v, const std::string& path) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) return Error(path, "must be true or false");
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_number_integer()) return Error(path, "must be an integer");
      if (std::is_unsigned_v<T> && v.get<int64_t>() < 0) {
        return Error(path, "must be >= 0");
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) return Error(path, "must be a number");
    } else {
      if (!v.is_string()) return Error(path, "must be a string");
    }
    return absl::OkStatus();
  }

  const nlohmann::json& object_;
  std::string where_;
  std::string help_;
};

// Whether `v` is an integer that T holds. nlohmann's get<T>() converts a
// float or an out-of-range integer without a check, which is undefined
// behaviour: ask this first of any number read from a file.
template <typename T>
bool HoldsInteger(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T>);
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    return v.get<uint64_t>() <=
           static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  const int64_t i = v.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return i >= 0 && static_cast<uint64_t>(i) <=
                         static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    return i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           i <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Parses the text of a task file (`what`: "task") into JSON: InvalidArgument
// "task: malformed JSON at byte B: ..." for bad syntax, and "task: malformed
// JSON: ... number overflow ..." for a number no double holds (1e999),
// which nlohmann reports by an exception even when asked not to throw.
inline absl::StatusOr<nlohmann::json> ParseJsonText(absl::string_view text,
                                                    absl::string_view what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": malformed JSON at byte ", e.byte, ": ", e.what()));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": malformed JSON: ", e.what()));
  }
}

}  // namespace hlab

#endif  // HLAB_COMMON_JSON_READER_H_
