// libFuzzer target: the sweep spec parser and validator
// (coordinator/sweep/spec_parser.h, spec_validator.h) on any text. The
// first byte picks YAML or JSON. Any input must give a spec or an
// InvalidArgument (NotFound never: no file is read), never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "coordinator/sweep/spec_parser.h"
#include "coordinator/sweep/spec_validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto format = data[0] % 2 == 0 ? hlab::sweep::SpecFormat::kYaml
                                       : hlab::sweep::SpecFormat::kJson;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      hlab::sweep::ParseSweepSpec(text, format);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) abort();
    return 0;
  }
  const absl::Status valid = hlab::sweep::ValidateSweepSpec(*spec);
  if (!valid.ok() && valid.code() != absl::StatusCode::kInvalidArgument) {
    abort();
  }
  return 0;
}
