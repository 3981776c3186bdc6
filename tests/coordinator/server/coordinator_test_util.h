// Helpers for the coordinator tests: an in-process coordinator on port 0
// over a database in a temporary directory, a fake clock, generated stubs
// as clients, and small specs.
#ifndef HLAB_TESTS_COORDINATOR_SERVER_COORDINATOR_TEST_UTIL_H_
#define HLAB_TESTS_COORDINATOR_SERVER_COORDINATOR_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/sweep/spec_parser.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab::coordinator::testing {

// A fresh directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "hlab_coord_XXXXXX";
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Time that moves only when a test says so.
class FakeClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  Clock AsClock() {
    return [this] { return Now(); };
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

inline CoordinatorOptions TestOptions(const std::string& db, FakeClock* clock) {
  CoordinatorOptions options;
  options.db_path = db;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "none";
  options.start_reaper = false;
  options.lease = absl::Seconds(30);
  options.expiry_backoff = absl::Seconds(1);
  options.clock = clock->AsClock();
  return options;
}

inline std::unique_ptr<Coordinator> StartOrDie(CoordinatorOptions options) {
  auto c = Coordinator::Start(std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

inline std::shared_ptr<grpc::Channel> Connect(const Coordinator& c) {
  return grpc::CreateChannel(c.address(), grpc::InsecureChannelCredentials());
}

inline hlab::v1::SweepSpec Spec(const std::string& yaml) {
  auto spec = hlab::sweep::ParseSweepSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : hlab::v1::SweepSpec();
}

inline hlab::v1::SweepSpec DemoSpec() {
  auto spec =
      hlab::sweep::LoadSweepSpec(HLAB_SOURCE_DIR "/examples/sweeps/demo.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : hlab::v1::SweepSpec();
}

// One architecture, one scale, `budgets` (a YAML list), no evaluation,
// trained from scratch per budget: one TRAIN task per run.
inline std::string TinySpecYaml(const std::string& name,
                                const std::string& budgets = "[5]",
                                int max_attempts = 2) {
  return "name: " + name +
         "\n"
         "architectures: [full]\n"
         "scales: [{name: S1, d_model: 32, n_layers: 2, n_heads: 4, "
         "n_kv_heads: 2}]\n"
         "budgets: {tokens_per_param: " +
         budgets +
         "}\n"
         "seq_len: 128\n"
         "batch_tokens: 1024\n"
         "schedule: {peak_lr: 3.0e-3, warmup_steps: 10}\n"
         "evaluation: {validation_loss: {enabled: false}}\n"
         "share_trunk: false\n"
         "retry: {max_attempts_per_run: " +
         std::to_string(max_attempts) +
         ", backoff_base_seconds: 1, backoff_max_seconds: 1}\n";
}

inline hlab::v1::Device Cpu(int index = 0) {
  hlab::v1::Device d;
  d.set_kind("cpu");
  d.set_index(index);
  d.set_cores(2);
  return d;
}

}  // namespace hlab::coordinator::testing

#endif  // HLAB_TESTS_COORDINATOR_SERVER_COORDINATOR_TEST_UTIL_H_
