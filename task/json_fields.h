// Field lists for the task files: each struct of the contract names its JSON
// fields once, in a static member template
//
//   template <class V, class S> static void Fields(V& v, S& s) {
//     v("peak_lr", s.peak_lr);
//     v("long_dir", s.long_dir, Omit::kWhenEmpty);
//     v.Required("model", s.model, "the model to train");
//   }
//
// and that one list is both how the struct is read (JsonFieldReader) and how
// it is written (JsonFieldWriter), so a field cannot be added to one side
// only. S is the struct when reading and the const struct when writing.
//
// A field is a bool, an integer, a double, a string, a std::vector of these,
// a struct with Fields (a nested object), a std::optional of a struct or a
// scalar (present or absent), or a type with a FieldCodec specialisation
// (its own JSON form: the model config, the decay shape).
//
// Reading keeps a field's default when its key is absent, refuses a wrong
// type as "PATH: must be an integer" (a number, a string, true or false, a
// list, an object), and refuses a key that no field names as "PATH: unknown
// field (see HELP)". The first error wins. Reading checks types only;
// whether values make sense is each struct's Validate function's.
//
// Thread-safety: plain objects; one per thread.
#ifndef HLAB_TASK_JSON_FIELDS_H_
#define HLAB_TASK_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
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
#include "common/json_reader.h"

namespace hlab::task {

// Whether the writer leaves a field out when it holds its type's empty value
// ("", 0, an empty list). Reading is the same either way.
enum class Omit { kNever, kWhenEmpty };

// A type with its own JSON form specialises this:
//   static absl::Status Read(const nlohmann::json& j, const std::string& path,
//                            T* out);
//   static nlohmann::json Write(const T& value);
template <class T>
struct FieldCodec;

namespace internal {

template <class T, class = void>
struct HasCodec : std::false_type {};
template <class T>
struct HasCodec<
    T, std::void_t<decltype(FieldCodec<T>::Write(std::declval<const T&>()))>>
    : std::true_type {};

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

struct Probe {
  template <class U>
  void operator()(const char*, U&, Omit = Omit::kNever) {}
  template <class U>
  void Required(const char*, U&, const char*) {}
};
template <class T, class = void>
struct HasFields : std::false_type {};
template <class T>
struct HasFields<T, std::void_t<decltype(T::Fields(std::declval<Probe&>(),
                                                   std::declval<T&>()))>>
    : std::true_type {};

}  // namespace internal

// InvalidArgument "PATH: MESSAGE": how every task-file error names its field.
absl::Status FieldError(absl::string_view path, absl::string_view message);

class JsonFieldReader {
 public:
  // `where` is the object's path ("" for the file), `help` where the fields
  // are listed ("hlab-train --help").
  JsonFieldReader(const nlohmann::json& object, std::string where,
                  std::string help)
      : object_(object), where_(std::move(where)), help_(std::move(help)) {
    if (!object_.is_object()) {
      status_ =
          FieldError(where_.empty() ? "task" : where_, "must be an object");
    }
  }

  // Reads a whole struct: `JsonFieldReader(j, "", help).Read(&task)`.
  template <class S>
  absl::Status Read(S* s) && {
    if (status_.ok()) S::Fields(*this, *s);
    if (status_.ok()) status_ = CheckKeys();
    return status_;
  }

  template <class T>
  void operator()(const char* key, T& value, Omit = Omit::kNever) {
    known_.insert(key);
    if (!status_.ok()) return;
    auto it = object_.find(key);
    if (it == object_.end()) return;
    status_ = ReadValue(*it, Path(key), &value);
  }

  // A field that must be present; `what` says what it is ("is required
  // (WHAT)").
  template <class T>
  void Required(const char* key, T& value, const char* what) {
    if (status_.ok() && !object_.contains(key)) {
      status_ = FieldError(Path(key), absl::StrCat("is required (", what, ")"));
    }
    (*this)(key, value);
  }

  std::string Path(absl::string_view key) const {
    return where_.empty() ? std::string(key) : absl::StrCat(where_, ".", key);
  }
  const std::string& help() const { return help_; }

 private:
  absl::Status CheckKeys() const {
    for (const auto& item : object_.items()) {
      if (known_.count(item.key()) == 0) {
        return FieldError(Path(item.key()),
                          absl::StrCat("unknown field (see ", help_, ")"));
      }
    }
    return absl::OkStatus();
  }

  template <class T>
  absl::Status ReadValue(const nlohmann::json& j, const std::string& path,
                         T* out) const {
    if constexpr (internal::HasCodec<T>::value) {
      return FieldCodec<T>::Read(j, path, out);
    } else if constexpr (internal::HasFields<T>::value) {
      return JsonFieldReader(j, path, help_).Read(out);
    } else if constexpr (internal::IsOptional<T>::value) {
      typename T::value_type v{};
      absl::Status s = ReadValue(j, path, &v);
      if (s.ok()) *out = std::move(v);
      return s;
    } else if constexpr (internal::IsVector<T>::value) {
      if (!j.is_array()) return FieldError(path, "must be a list");
      T list;
      for (size_t i = 0; i < j.size(); ++i) {
        typename T::value_type v{};
        absl::Status s = ReadValue(j[i], absl::StrCat(path, "[", i, "]"), &v);
        if (!s.ok()) return s;
        list.push_back(std::move(v));
      }
      *out = std::move(list);
      return absl::OkStatus();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!j.is_boolean()) {
        return FieldError(path, "must be true or false");
      }
      *out = j.get<bool>();
      return absl::OkStatus();
    } else if constexpr (std::is_integral_v<T>) {
      if (!j.is_number_integer()) {
        return FieldError(path, "must be an integer");
      }
      if (!HoldsInteger<T>(j)) {
        return FieldError(path, std::is_unsigned_v<T>
                                    ? "must be an integer >= 0"
                                    : "must be a 64-bit integer");
      }
      *out = j.get<T>();
      return absl::OkStatus();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!j.is_number()) return FieldError(path, "must be a number");
      *out = j.get<T>();
      return absl::OkStatus();
    } else {
      static_assert(std::is_same_v<T, std::string>, "unsupported field type");
      if (!j.is_string()) return FieldError(path, "must be a string");
      *out = j.get<std::string>();
      return absl::OkStatus();
    }
  }

  const nlohmann::json& object_;
  std::string where_;
  std::string help_;
  std::set<std::string> known_;
  absl::Status status_;
};

class JsonFieldWriter {
 public:
  // Writes a whole struct as a JSON object.
  template <class S>
  static nlohmann::json Write(const S& s) {
    JsonFieldWriter w;
    S::Fields(w, s);
    return std::move(w.out_);
  }

  template <class T>
  void operator()(const char* key, const T& value, Omit omit = Omit::kNever) {
    if constexpr (internal::IsOptional<T>::value) {
      if (value.has_value()) out_[key] = WriteValue(*value);
    } else {
      if (omit == Omit::kWhenEmpty && IsEmpty(value)) return;
      out_[key] = WriteValue(value);
    }
  }
  template <class T>
  void Required(const char* key, const T& value, const char*) {
    (*this)(key, value);
  }

 private:
  JsonFieldWriter() : out_(nlohmann::json::object()) {}

  template <class T>
  static bool IsEmpty(const T& v) {
    if constexpr (internal::IsVector<T>::value ||
                  std::is_same_v<T, std::string>) {
      return v.empty();
    } else if constexpr (std::is_arithmetic_v<T>) {
      return v == T{};
    } else {
      return false;
    }
  }

  template <class T>
  static nlohmann::json WriteValue(const T& v) {
    if constexpr (internal::HasCodec<T>::value) {
      return FieldCodec<T>::Write(v);
    } else if constexpr (internal::HasFields<T>::value) {
      return Write(v);
    } else if constexpr (internal::IsVector<T>::value) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& item : v) list.push_back(WriteValue(item));
      return list;
    } else {
      return nlohmann::json(v);
    }
  }

  nlohmann::json out_;
};

// Reads a task file's text; NotFound "cannot read task file 'PATH'". The one
// loader of hlab-train's and hlab-eval's task files.
absl::StatusOr<std::string> ReadTaskFile(const std::string& path);

// Parses `text` with `parse` and names the file in an error ("PATH: ...").
template <class T, class Parse>
absl::StatusOr<T> LoadTaskFile(const std::string& path, Parse parse) {
  absl::StatusOr<std::string> text = ReadTaskFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<T> task = parse(*text);
  if (!task.ok()) {
    return absl::Status(task.status().code(),
                        absl::StrCat(path, ": ", task.status().message()));
  }
  return task;
}

}  // namespace hlab::task

#endif  // HLAB_TASK_JSON_FIELDS_H_
