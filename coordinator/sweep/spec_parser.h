// Reading sweep specs: YAML or JSON text -> hlab.v1.SweepSpec.
//
// The proto is canonical: keys are its field names (docs/sweeps.md). Parsing
// is strict: malformed text, unknown keys, duplicate keys, wrong types and
// missing values are InvalidArgument errors that name the field path and the
// line and column, e.g.
//   "scales[0].d_modle: unknown field (line 7, column 7); known fields: ..."
// Parsing checks form only; ValidateSweepSpec (spec_validator.h) checks
// meaning.
//
// Thread-safe (pure functions).
//
//   HLAB_ASSIGN_OR_RETURN(hlab::v1::SweepSpec spec,
//                         hlab::sweep::LoadSweepSpec("examples/sweeps/demo.yaml"));
//   HLAB_ASSIGN_OR_RETURN(SweepPlan plan, PlanSweep(spec));
#ifndef HLAB_COORDINATOR_SWEEP_SPEC_PARSER_H_
#define HLAB_COORDINATOR_SWEEP_SPEC_PARSER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::sweep {

enum class SpecFormat {
  kAuto,  // JSON if the first non-blank character is '{', else YAML
  kYaml,
  kJson,
};

// Parses spec text. InvalidArgument (naming field and position) on any
// malformed or unknown content, and in YAML on an empty list (`seeds: []`):
// there a list is omitted for its default, never given empty. (JSON, the
// form SweepSpecToCanonicalJson prints with [] for every unset list, may
// carry them.)
absl::StatusOr<hlab::v1::SweepSpec> ParseSweepSpec(
    absl::string_view text, SpecFormat format = SpecFormat::kAuto);

// Reads and parses a file: ".json" is JSON, anything else YAML (which also
// reads JSON). NotFound if the file does not exist, PermissionDenied if it
// cannot be read; parse errors are prefixed with the path.
absl::StatusOr<hlab::v1::SweepSpec> LoadSweepSpec(const std::string& path);

// The spec as JSON with proto field names and every field printed, fields
// in field-number order: the canonical text that SpecHash hashes.
std::string SweepSpecToCanonicalJson(const hlab::v1::SweepSpec& spec);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_SPEC_PARSER_H_
