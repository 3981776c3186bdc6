#include "worker/devices.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/trainer_process.h"

namespace hlab::worker {

absl::StatusOr<std::vector<hlab::v1::Device>> ParseProbeDevices(
    absl::string_view json) {
  using Json = nlohmann::json;
  const Json j = Json::parse(json.begin(), json.end(), nullptr,
                             /*allow_exceptions=*/false);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device probe: ", what, " in '", json.substr(0, 200), "'"));
  };
  if (!j.is_object()) return bad("not a JSON object");
  auto cpu = j.find("cpu");
  if (cpu == j.end() || !cpu->is_object()) return bad("no \"cpu\" object");
  std::vector<hlab::v1::Device> devices;
  hlab::v1::Device c;
  c.set_kind("cpu");
  c.set_index(0);
  c.set_name("cpu");
  c.set_cores(cpu->value("cores", 0));
  c.set_memory_bytes(cpu->value("memory_bytes", int64_t{0}));
  if (c.cores() <= 0) return bad("cpu.cores missing or not positive");
  devices.push_back(c);
  auto cuda = j.find("cuda");
  if (cuda != j.end()) {
    if (!cuda->is_array()) return bad("\"cuda\" is not a list");
    for (const Json& g : *cuda) {
      if (!g.is_object() || !g.contains("index") ||
          !g["index"].is_number_integer()) {
        return bad("a cuda device without an integer \"index\"");
      }
      hlab::v1::Device d;
      d.set_kind("cuda");
      d.set_index(g["index"].get<int>());
      d.set_name(g.value("name", ""));
      d.set_memory_bytes(g.value("memory_bytes", int64_t{0}));
      devices.push_back(d);
    }
  }
  return devices;
}

absl::StatusOr<std::vector<hlab::v1::Device>> ProbeDevices(
    const std::string& trainer, absl::Duration timeout) {
  HLAB_ASSIGN_OR_RETURN(std::string out,
                        RunAndCapture({trainer, "--probe-devices"}, timeout));
  return ParseProbeDevices(out);
}

int CountGpus(const std::vector<hlab::v1::Device>& devices) {
  int n = 0;
  for (const hlab::v1::Device& d : devices) n += d.kind() == "cuda";
  return n;
}

absl::StatusOr<std::string> ChildCudaVisibleDevices(
    const std::vector<int>& ordinals,
    const std::optional<std::string>& daemon_visible) {
  std::vector<std::string> entries;
  if (daemon_visible.has_value()) {
    for (absl::string_view e : absl::StrSplit(*daemon_visible, ',')) {
      entries.emplace_back(absl::StripAsciiWhitespace(e));
    }
  }
  std::vector<std::string> out;
  for (int i : ordinals) {
    if (!daemon_visible.has_value()) {
      out.push_back(absl::StrCat(i));
      continue;
    }
    if (i < 0 || static_cast<size_t>(i) >= entries.size() ||
        entries[static_cast<size_t>(i)].empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ordinal ", i, " is not in this worker's CUDA_VISIBLE_DEVICES=\"",
          *daemon_visible,
          "\" (the probe's GPUs are numbered within it); restart the worker "
          "so that it probes the GPUs it is given"));
    }
    out.push_back(entries[static_cast<size_t>(i)]);
  }
  return absl::StrJoin(out, ",");
}

}  // namespace hlab::worker
