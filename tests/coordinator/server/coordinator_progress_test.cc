// The progress of runs that share a WSD trunk, as every reader sees it: a
// trunk with runs of budgets B1 < B2 < B3 at position P between the first
// two branch points. Each run shows min(P, its branch point) of its own
// budget, the trunk's loss there and the phase TRUNK, in ListRuns and
// GetSweep (`hlab status`), in WatchSweep's RUN_PROGRESS events (`hlab
// watch`) and in the Prometheus gauges; then a decay carries one run on to
// its budget. A trunk in segments carries the runs past each segment.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include "absl/strings/str_cat.h"
#include "coordinator/server/coordinator.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"
#include "tests/coordinator/server/worker_service_fixture.h"

namespace hlab::coordinator {
namespace {

using testing::WorkerServiceTest;

constexpr int64_t kBatch = 1024;  // TinySpecYaml's batch_tokens

double TrunkLoss(int64_t step) {
  return 6.0 - 0.001 * static_cast<double>(step);
}

// The value of the gauge `name` with exactly `labels`; NaN if none.
double Gauge(CoordinatorMetrics* metrics, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family :
       metrics->registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::map<std::string, std::string> have;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        have[l.name] = l.value;
      }
      if (have == labels) return m.gauge.value;
    }
  }
  return std::nan("");
}

class ProgressTest : public WorkerServiceTest {
 protected:
  // Submits three budgets on one shared trunk, leases the trunk and reports
  // its points up to step `p_step` (chosen between the first two branch
  // points) without run ids, as hlab-train's records come.
  void StartTrunk() {
    std::string yaml = testing::TinySpecYaml("three", "[5, 10, 20]");
    yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
    Submit(yaml);
    Register("w1");
    hlab::v1::LeaseResponse lease = Lease("w1");
    ASSERT_TRUE(lease.has_task());
    trunk_ = lease.task();
    ASSERT_EQ(trunk_.kind(), hlab::v1::TASK_KIND_TRUNK);
    ASSERT_EQ(trunk_.branch_points_size(), 3);
    branches_.assign(trunk_.branch_points().begin(),
                     trunk_.branch_points().end());
    std::sort(branches_.begin(), branches_.end(),
              [](const auto& a, const auto& b) { return a.step() < b.step(); });
    p_step_ = (branches_[0].step() + branches_[1].step()) / 2;
    ASSERT_GT(p_step_, branches_[0].step());
    ASSERT_LT(p_step_, branches_[1].step());
    ReportTrunkLosses(trunk_.task_id(), p_step_);
  }

  // Reports the trunk loss of steps 1..last for task `task_id` (attempt 1 of
  // worker w1), without run ids, as hlab-train's records come.
  void ReportTrunkLosses(const std::string& task_id, int64_t last) {
    grpc::ClientContext ctx;
    hlab::v1::ReportMetricsRequest request;
    request.set_task_id(task_id);
    request.set_attempt(1);
    request.set_worker_id("w1");
    for (int64_t step = 1; step <= last; ++step) {
      hlab::v1::MetricPoint* p = request.add_points();
      p->set_name("train/loss");
      p->set_step(step);
      p->set_tokens(step * kBatch);
      p->set_value(TrunkLoss(step));
    }
    hlab::v1::ReportMetricsResponse response;
    ASSERT_TRUE(worker_->ReportMetrics(&ctx, request, &response).ok());
  }

  // The run's own position: the trunk's, up to its branch point.
  int64_t OwnStep(const hlab::v1::BranchPoint& b) const {
    return std::min(p_step_, b.step());
  }

  std::map<std::string, hlab::v1::Run> Runs() {
    grpc::ClientContext ctx;
    hlab::v1::ListRunsRequest request;
    request.set_sweep("three");
    hlab::v1::ListRunsResponse response;
    EXPECT_TRUE(client_->ListRuns(&ctx, request, &response).ok());
    std::map<std::string, hlab::v1::Run> runs;
    for (const hlab::v1::Run& r : response.runs()) runs[r.run_id()] = r;
    return runs;
  }

  hlab::v1::Sweep GetSweep() {
    grpc::ClientContext ctx;
    hlab::v1::GetSweepRequest request;
    request.set_sweep("three");
    hlab::v1::GetSweepResponse response;
    EXPECT_TRUE(client_->GetSweep(&ctx, request, &response).ok());
    return response.sweep();
  }

  // Every event of the sweep so far, through WatchSweep.
  std::vector<hlab::v1::Event> Events() {
    const int64_t last =
        coordinator_->store()->EventsSince(0, 0, 1000000)->back().seq;
    grpc::ClientContext ctx;
    hlab::v1::WatchSweepRequest request;
    request.set_sweep("three");
    auto reader = client_->WatchSweep(&ctx, request);
    std::vector<hlab::v1::Event> events;
    hlab::v1::Event event;
    while (reader->Read(&event)) {
      events.push_back(event);
      if (event.sequence() >= last) break;
    }
    ctx.TryCancel();
    reader->Finish();
    return events;
  }

  hlab::v1::Task trunk_;
  std::vector<hlab::v1::BranchPoint> branches_;
  int64_t p_step_ = 0;
};

TEST_F(ProgressTest, RunsOnATrainingTrunkShowTheirOwnTokensInListRuns) {
  StartTrunk();
  std::map<std::string, hlab::v1::Run> runs = Runs();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& b : branches_) {
    const hlab::v1::Run& run = runs[b.run_id()];
    EXPECT_EQ(run.tokens_done(), OwnStep(b) * kBatch) << b.run_id();
    EXPECT_EQ(run.steps_done(), OwnStep(b)) << b.run_id();
    EXPECT_DOUBLE_EQ(run.final_loss(), TrunkLoss(OwnStep(b))) << b.run_id();
    EXPECT_EQ(run.phase(), hlab::v1::RUN_PHASE_TRUNK) << b.run_id();
    EXPECT_LT(run.tokens_done(), run.tokens());
  }
  const hlab::v1::Sweep sweep = GetSweep();
  EXPECT_EQ(sweep.runs_on_trunk(), 3);
  EXPECT_EQ(sweep.runs_waiting(), 0);
  EXPECT_EQ(sweep.runs_running(), 0);  // no task of their own runs
}

TEST_F(ProgressTest, WatchGetsEachRunsOwnProgressFromTheTrunk) {
  StartTrunk();
  // The newest RUN_PROGRESS of each run.
  std::map<std::string, hlab::v1::Event> newest;
  for (const hlab::v1::Event& e : Events()) {
    if (e.kind() == hlab::v1::RUN_PROGRESS) newest[e.run_id()] = e;
  }
  ASSERT_EQ(newest.size(), 3u);
  for (const auto& b : branches_) {
    const hlab::v1::Event& e = newest[b.run_id()];
    EXPECT_EQ(e.tokens(), OwnStep(b) * kBatch) << b.run_id();
    EXPECT_EQ(e.step(), OwnStep(b)) << b.run_id();
    EXPECT_DOUBLE_EQ(e.loss(), TrunkLoss(OwnStep(b))) << b.run_id();
    EXPECT_EQ(e.run_phase(), hlab::v1::RUN_PHASE_TRUNK) << b.run_id();
  }
}

TEST_F(ProgressTest, GaugesShowEachRunsOwnProgressAndTheSweepsPhases) {
  StartTrunk();
  // A heartbeat at the trunk's position: the first run, past its branch
  // point, trains no more of its own.
  {
    grpc::ClientContext ctx;
    hlab::v1::HeartbeatRequest request;
    request.set_worker_id("w1");
    hlab::v1::TaskProgress* p = request.add_tasks();
    p->set_task_id(trunk_.task_id());
    p->set_attempt(1);
    p->set_step(p_step_);
    p->set_tokens(p_step_ * kBatch);
    p->set_loss(TrunkLoss(p_step_));
    p->set_tokens_per_s(1000);
    hlab::v1::HeartbeatResponse response;
    ASSERT_TRUE(worker_->Heartbeat(&ctx, request, &response).ok());
  }
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  CoordinatorMetrics* metrics = coordinator_->metrics();
  std::map<std::string, hlab::v1::Run> runs = Runs();
  double trained = 0;
  for (const auto& b : branches_) {
    const std::map<std::string, std::string> labels = {{"run", b.run_id()}};
    const double budget = static_cast<double>(runs[b.run_id()].tokens());
    const double own = static_cast<double>(OwnStep(b) * kBatch);
    trained += own;
    EXPECT_DOUBLE_EQ(Gauge(metrics, "hlab_run_progress_ratio", labels),
                     own / budget)
        << b.run_id();
    EXPECT_DOUBLE_EQ(Gauge(metrics, "hlab_run_loss", labels),
                     TrunkLoss(OwnStep(b)))
        << b.run_id();
    EXPECT_DOUBLE_EQ(Gauge(metrics, "hlab_run_tokens_per_second", labels),
                     b.step() > p_step_ ? 1000 : 0)
        << b.run_id();
  }
  const std::map<std::string, std::string> sweep = {{"sweep", "three"},
                                                    {"sweep_id", "1"}};
  std::map<std::string, std::string> trunk = sweep;
  trunk["phase"] = "TRUNK";
  EXPECT_EQ(Gauge(metrics, "hlab_sweep_run_phases", trunk), 3);
  std::map<std::string, std::string> waiting = sweep;
  waiting["phase"] = "WAITING";
  EXPECT_EQ(Gauge(metrics, "hlab_sweep_run_phases", waiting), 0);
  EXPECT_DOUBLE_EQ(Gauge(metrics, "hlab_sweep_tokens_trained", sweep), trained);
}

TEST_F(ProgressTest, ADecayCarriesItsRunFromTheBranchPointToItsBudget) {
  StartTrunk();
  for (const auto& b : branches_) {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(trunk_.task_id());
    request.set_attempt(1);
    request.mutable_checkpoint()->set_step(b.step());
    request.mutable_checkpoint()->set_branch_point(true);
    request.mutable_checkpoint()->set_path("/ck/branch-" + b.run_id());
    hlab::v1::ReportCheckpointResponse response;
    ASSERT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
  }
  ASSERT_TRUE(Complete(trunk_, 1, "w1").ok());
  EXPECT_EQ(GetSweep().runs_waiting(), 3);
  hlab::v1::LeaseResponse decay = Lease("w1");
  ASSERT_TRUE(decay.has_task());
  ASSERT_EQ(decay.task().kind(), hlab::v1::TASK_KIND_DECAY);
  const std::string run_id = decay.task().run_ids(0);
  const int64_t start = decay.task().start_step();
  const int64_t end = decay.task().end_step();
  {
    grpc::ClientContext ctx;
    hlab::v1::ReportMetricsRequest request;
    request.set_task_id(decay.task().task_id());
    request.set_attempt(1);
    request.set_worker_id("w1");
    hlab::v1::MetricPoint* p = request.add_points();
    p->set_name("train/loss");
    p->set_step(end);
    p->set_tokens(end * kBatch);
    p->set_value(2.5);
    hlab::v1::ReportMetricsResponse response;
    ASSERT_TRUE(worker_->ReportMetrics(&ctx, request, &response).ok());
  }
  hlab::v1::Run run = Runs()[run_id];
  EXPECT_EQ(run.phase(), hlab::v1::RUN_PHASE_DECAYING);
  EXPECT_EQ(run.tokens_done(), run.tokens());  // its whole budget
  EXPECT_EQ(run.tokens_done(), end * kBatch);
  const hlab::v1::Sweep sweep = GetSweep();
  EXPECT_EQ(sweep.runs_decaying(), 1);
  EXPECT_EQ(sweep.runs_waiting(), 2);
  EXPECT_EQ(sweep.runs_on_trunk(), 0);
  // In the event stream: from the trunk's position at the branch point
  // (where the decay started) to the budget.
  std::vector<int64_t> tokens;
  for (const hlab::v1::Event& e : Events()) {
    if (e.kind() == hlab::v1::RUN_PROGRESS && e.run_id() == run_id &&
        e.run_phase() == hlab::v1::RUN_PHASE_DECAYING) {
      tokens.push_back(e.tokens());
    }
  }
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_LE(tokens[0], start * kBatch);
  EXPECT_EQ(tokens[1], end * kBatch);
  ASSERT_TRUE(Complete(decay.task(), 1, "w1").ok());
  // Trained, with nothing else to do: no evaluation is planned.
  EXPECT_EQ(Runs()[run_id].phase(), hlab::v1::RUN_PHASE_SUCCEEDED);
}

// schedule_policy: adaptive trains the trunk in segments: a segment's
// points and heartbeats belong to the runs that branch at or past its end,
// which are on the trunk while it trains; once it is done, the next
// segment carries only the runs past its branch point.
TEST_F(ProgressTest, ASegmentCarriesTheRunsThatBranchAtOrPastItsEnd) {
  std::string yaml = testing::TinySpecYaml("three", "[5, 10, 20]");
  yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
  Submit(yaml +
         "fit: {fit_scales: [S1]}\n"
         "adaptive: {target: {scales: [S1]}}\n"
         "schedule_policy: adaptive\n");
  Register("w1");
  const hlab::v1::Task first = Lease("w1").task();
  ASSERT_EQ(first.kind(), hlab::v1::TASK_KIND_TRUNK);
  ASSERT_EQ(first.start_step(), 0);
  ASSERT_EQ(first.branch_points_size(), 3);  // every run passes through it
  const int64_t end = first.end_step();
  ReportTrunkLosses(first.task_id(), end);
  {
    grpc::ClientContext ctx;
    hlab::v1::HeartbeatRequest request;
    request.set_worker_id("w1");
    hlab::v1::TaskProgress* p = request.add_tasks();
    p->set_task_id(first.task_id());
    p->set_attempt(1);
    p->set_step(end);
    p->set_tokens(end * kBatch);
    p->set_tokens_per_s(1000);
    hlab::v1::HeartbeatResponse response;
    ASSERT_TRUE(worker_->Heartbeat(&ctx, request, &response).ok());
  }
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  std::string shortest;
  for (const auto& b : first.branch_points()) {
    const hlab::v1::Run run = Runs()[b.run_id()];
    EXPECT_EQ(run.phase(), hlab::v1::RUN_PHASE_TRUNK) << b.run_id();
    EXPECT_EQ(run.steps_done(), end) << b.run_id();
    EXPECT_DOUBLE_EQ(Gauge(coordinator_->metrics(),
                           "hlab_run_tokens_per_second", {{"run", b.run_id()}}),
                     b.step() > end ? 1000 : 0)
        << b.run_id();
    if (b.step() == end) shortest = b.run_id();
  }
  ASSERT_FALSE(shortest.empty());
  EXPECT_EQ(GetSweep().runs_on_trunk(), 3);
  {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(first.task_id());
    request.set_attempt(1);
    request.mutable_checkpoint()->set_step(end);
    request.mutable_checkpoint()->set_branch_point(true);
    request.mutable_checkpoint()->set_path("/ck/first");
    hlab::v1::ReportCheckpointResponse response;
    ASSERT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
  }
  ASSERT_TRUE(Complete(first, 1, "w1").ok());
  EXPECT_EQ(GetSweep().runs_on_trunk(), 0);
  // The next segment (its decay or the segment may lease first).
  hlab::v1::Task second;
  for (int i = 0; i < 3 && second.task_id().empty(); ++i) {
    const hlab::v1::Task next = Lease("w1").task();
    if (next.kind() == hlab::v1::TASK_KIND_TRUNK) second = next;
  }
  ASSERT_EQ(second.kind(), hlab::v1::TASK_KIND_TRUNK);
  EXPECT_EQ(second.start_step(), end);
  EXPECT_EQ(second.branch_points_size(), 2);
  for (const auto& b : second.branch_points()) {
    EXPECT_NE(b.run_id(), shortest);
    EXPECT_EQ(Runs()[b.run_id()].phase(), hlab::v1::RUN_PHASE_TRUNK);
  }
  EXPECT_NE(Runs()[shortest].phase(), hlab::v1::RUN_PHASE_TRUNK);
  EXPECT_EQ(GetSweep().runs_on_trunk(), 2);
}

}  // namespace
}  // namespace hlab::coordinator
