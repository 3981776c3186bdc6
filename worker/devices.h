// Device discovery for the worker daemon, without LibTorch: it runs
// `hlab-train --probe-devices` and parses the JSON it prints,
//
//   {"cpu": {"cores": 16, "memory_bytes": 137438953472},
//    "cuda": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": ...}],
//    "cuda_build": true}
//
// into hlab.v1.Device messages: one "cpu" device (index 0, with cores and
// host memory) followed by one "cuda" device per GPU. Using the trainer's
// own view means the worker advertises exactly what its hlab-train can use
// (a CPU-only build lists no GPUs even on a GPU host).
//
// Thread-safe: plain functions.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<hlab::v1::Device> devices,
//                         ProbeDevices("/opt/hlab/bin/hlab-train"));
#ifndef HLAB_WORKER_DEVICES_H_
#define HLAB_WORKER_DEVICES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hlab/v1/worker.pb.h"

namespace hlab::worker {

// Parses the probe's JSON. InvalidArgument names what is missing or wrong.
absl::StatusOr<std::vector<hlab::v1::Device>> ParseProbeDevices(
    absl::string_view json);

// Runs `trainer --probe-devices` (killed after `timeout`) and parses it.
// NotFound when the trainer cannot be executed; Internal / InvalidArgument
// when it fails or prints something else.
absl::StatusOr<std::vector<hlab::v1::Device>> ProbeDevices(
    const std::string& trainer, absl::Duration timeout = absl::Seconds(120));

// The number of "cuda" devices in `devices`.
int CountGpus(const std::vector<hlab::v1::Device>& devices);

// The CUDA_VISIBLE_DEVICES a child gets to see exactly the GPUs with these
// probe ordinals. The probe ran under the daemon's own CUDA_VISIBLE_DEVICES
// (set by Slurm, a container or MIG), so its ordinal i is the i-th entry of
// that list (an index, a GPU-<uuid> or a MIG-<uuid>), not physical GPU i;
// `daemon_visible` is the daemon's value, nullopt when it has none (then
// ordinal i is GPU i). No ordinals give "": the child sees no GPU (an EVAL
// task, or a CPU task on a GPU host, stays off the training ranks' GPUs).
// FailedPrecondition when an ordinal is not in the daemon's list.
//
//   ChildCudaVisibleDevices({1}, "2,3")            -> "3"
//   ChildCudaVisibleDevices({0, 1}, "GPU-a,GPU-b") -> "GPU-a,GPU-b"
//   ChildCudaVisibleDevices({}, std::nullopt)      -> ""
absl::StatusOr<std::string> ChildCudaVisibleDevices(
    const std::vector<int>& ordinals,
    const std::optional<std::string>& daemon_visible);

}  // namespace hlab::worker

#endif  // HLAB_WORKER_DEVICES_H_
