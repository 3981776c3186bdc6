// A coordinator whose database cannot be written (read-only, disk full):
// reads are served, writes are refused with UNAVAILABLE and a message that
// says so, hlab_store_writable and hlab_store_write_failures_total raise
// the alert, and it recovers with no restart when the storage does. Leases
// whose heartbeats it refused meanwhile do not expire.
//
// The storage fails deterministically through the store's writer
// connection: PRAGMA query_only (every write refused, as on a read-only
// file system) and PRAGMA max_page_count (the file may not grow: a full
// disk). store_storage_test has a real full tmpfs.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/store_unavailable.h"
#include "coordinator/server/coordinator.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"
#include "tests/coordinator/server/worker_service_fixture.h"

namespace hlab::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class StorageTest : public testing::WorkerServiceTest {
 protected:
  void Writer(const std::string& pragma) {
    ASSERT_TRUE(coordinator_->store()
                    ->RunOnWriterForTesting([pragma](store::Database& db) {
                      return db.Exec(pragma);
                    })
                    .ok());
  }

  grpc::Status TryHeartbeat(const std::string& worker_id,
                            const hlab::v1::Task& task) {
    grpc::ClientContext ctx;
    hlab::v1::HeartbeatRequest request;
    request.set_worker_id(worker_id);
    hlab::v1::TaskProgress* p = request.add_tasks();
    p->set_task_id(task.task_id());
    p->set_attempt(task.attempt());
    hlab::v1::HeartbeatResponse response;
    return worker_->Heartbeat(&ctx, request, &response);
  }

  grpc::Status TrySubmit(const std::string& yaml) {
    return TrySubmit(testing::Spec(yaml));
  }
  grpc::Status TrySubmit(const hlab::v1::SweepSpec& spec) {
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    hlab::v1::SubmitSweepResponse response;
    return client_->SubmitSweep(&ctx, request, &response);
  }

  static void ExpectNotWritable(const grpc::Status& status) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
    EXPECT_THAT(status.error_message(), StartsWith(kStoreNotWritable));
  }

  std::string TaskState(const std::string& id) {
    return Query("SELECT state FROM tasks WHERE id = '" + id + "'")
        .rows(0)
        .values(0)
        .text_value();
  }
};

TEST_F(StorageTest, ReadOnlyDatabaseServesReadsRefusesWritesAndRecovers) {
  hlab::v1::SubmitSweepResponse sweep = Submit(testing::TinySpecYaml("a"));
  Register("w1");
  hlab::v1::Task task = Lease("w1").task();
  ASSERT_FALSE(task.task_id().empty());
  CoordinatorMetrics& metrics = *coordinator_->metrics();
  EXPECT_EQ(metrics.store_writable(), 1);

  Writer("PRAGMA query_only = 1");
  hlab::v1::ReportMetricsResponse reported;
  grpc::Status refused = ReportMetrics(task, task.attempt(), "w1", &reported);
  ExpectNotWritable(refused);
  EXPECT_THAT(refused.error_message(), HasSubstr("read-only"));
  ExpectNotWritable(TryHeartbeat("w1", task));
  ExpectNotWritable(TrySubmit(testing::TinySpecYaml("b")));
  EXPECT_EQ(metrics.store_writable(), 0);
  EXPECT_GE(metrics.store_write_failures(), 3);

  // Reads: the sweep, its runs, a query, the workers.
  {
    grpc::ClientContext ctx;
    hlab::v1::GetSweepRequest request;
    request.set_sweep(sweep.sweep().sweep_id());
    hlab::v1::GetSweepResponse response;
    grpc::Status status = client_->GetSweep(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::ListRunsRequest request;
    hlab::v1::ListRunsResponse response;
    grpc::Status status = client_->ListRuns(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.runs_size(), 1);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM metrics").rows(0).values(0).int_value(),
            0);
  EXPECT_EQ(TaskState(task.task_id()), "LEASED");

  // The storage is writable again: the worker's retry lands, no restart.
  Writer("PRAGMA query_only = 0");
  grpc::Status again = ReportMetrics(task, task.attempt(), "w1", &reported);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(metrics.store_writable(), 1);
  EXPECT_EQ(Query("SELECT count(*) FROM metrics").rows(0).values(0).int_value(),
            3);
  grpc::Status submitted = TrySubmit(testing::TinySpecYaml("b"));
  EXPECT_TRUE(submitted.ok()) << submitted.error_message();
}

// A submit is several writes: the sweep row may fit where its runs do not.
// Submitting is idempotent, so the same submit after space returns
// completes it.
TEST_F(StorageTest, FullDiskRefusesASubmitAndTheSameSubmitCompletesIt) {
  Submit(testing::TinySpecYaml("a"));
  Writer("PRAGMA max_page_count = 1");  // no page more than now
  grpc::Status refused = TrySubmit(testing::DemoSpec());  // 48 runs
  ExpectNotWritable(refused);
  EXPECT_THAT(refused.error_message(), HasSubstr("disk full"));
  EXPECT_EQ(Query("SELECT count(*) FROM runs").rows(0).values(0).int_value(),
            1);
  Writer("PRAGMA max_page_count = 1000000");
  grpc::Status submitted = TrySubmit(testing::DemoSpec());
  EXPECT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_EQ(Query("SELECT count(*) FROM runs").rows(0).values(0).int_value(),
            49);
  EXPECT_EQ(Query("SELECT count(*) FROM sweeps").rows(0).values(0).int_value(),
            2);
}

// Heartbeats refused by the coordinator's storage do not cost the worker
// its lease: no lease expires while writes are refused, nor for a lease
// time after the last refusal; then expiry works as before.
TEST_F(StorageTest, LeasesOutliveAnOutageAndExpireAfterIt) {
  Submit(testing::TinySpecYaml("a"));
  Register("w1");
  hlab::v1::Task task = Lease("w1").task();
  ASSERT_FALSE(task.task_id().empty());
  LeaseReaper& reaper = *coordinator_->reaper();

  Writer("PRAGMA query_only = 1");
  clock_.Advance(absl::Seconds(60));  // past the lease (30 s)
  ExpectNotWritable(TryHeartbeat("w1", task));
  (void)reaper.Tick();
  EXPECT_EQ(TaskState(task.task_id()), "LEASED");

  Writer("PRAGMA query_only = 0");
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(reaper.Tick().ok());
  EXPECT_EQ(TaskState(task.task_id()), "LEASED");  // the worker's turn
  ASSERT_TRUE(TryHeartbeat("w1", task).ok());

  // The worker goes quiet: its lease expires a lease time later.
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(reaper.Tick().ok());
  EXPECT_EQ(TaskState(task.task_id()), "PENDING");
}

}  // namespace
}  // namespace hlab::coordinator
