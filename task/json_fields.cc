#include "task/json_fields.h"

#include <fstream>
#include <sstream>

namespace hlab::task {

absl::Status FieldError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::StatusOr<std::string> ReadTaskFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read task file '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hlab::task
