// `hlab watch` against a fake ClientService that drops the stream: the
// events it prints, the resume after the last sequence number, the end of
// the sweep; and the in-place drawing of ProgressView.
#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/cli.h"
#include "cli/client_commands.h"
#include "cli/progress_view.h"
#include "tests/cli/fake_client_service.h"

namespace hlab::cli {
namespace {

using testing::FakeClientService;

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

constexpr int64_t kT0 = 1700000000000;  // 2023-11-14 22:13:20 UTC

v1::Event StateChange(int64_t seq, const std::string& run, v1::RunState s) {
  v1::Event e;
  e.set_sequence(seq);
  e.set_time_unix_ms(kT0 + seq * 1000);
  e.set_kind(v1::RUN_STATE_CHANGED);
  e.set_sweep_id("sw-1");
  e.set_run_id(run);
  e.set_run_state(s);
  return e;
}

v1::Event Progress(int64_t seq, int64_t ms, const std::string& run,
                   int64_t tokens, double loss) {
  v1::Event e;
  e.set_sequence(seq);
  e.set_time_unix_ms(kT0 + ms);
  e.set_kind(v1::RUN_PROGRESS);
  e.set_sweep_id("sw-1");
  e.set_run_id(run);
  e.set_step(tokens / 1000);
  e.set_tokens(tokens);
  e.set_loss(loss);
  return e;
}

// RUN_PROGRESS as the coordinator sends it: with the run's phase and the
// tokens of its own budget.
v1::Event PhaseProgress(int64_t seq, int64_t ms, const std::string& run,
                        v1::RunPhase phase, int64_t tokens, double loss) {
  v1::Event e = Progress(seq, ms, run, tokens, loss);
  e.set_step(tokens / 1000);
  e.set_run_phase(phase);
  return e;
}

void SetUpSweep(FakeClientService* fake) {
  v1::Sweep* sweep = fake->get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_SUCCEEDED);
  sweep->set_runs_total(1);
  sweep->set_runs_succeeded(1);
  v1::Run* run = fake->list_runs.add_runs();
  run->set_run_id("0123456789abcdef");
  run->set_architecture("gdn");
  run->set_scale("S1");
  run->set_tokens(10000000);
  run->set_state(v1::RUN_STATE_PENDING);
}

TEST(WatchTest, PrintsEventsAndResumesAfterADroppedStream) {
  FakeClientService fake;
  SetUpSweep(&fake);
  const std::string run = "0123456789abcdef";
  v1::Event finished;
  finished.set_sequence(6);
  finished.set_time_unix_ms(kT0 + 100000);
  finished.set_kind(v1::SWEEP_FINISHED);
  finished.set_sweep_id("sw-1");
  finished.set_message("all runs succeeded");
  fake.watch_streams = {
      {StateChange(1, run, v1::RUN_STATE_RUNNING),
       Progress(2, 10000, run, 1000000, 4.5),
       Progress(3, 20000, run, 2000000, 4.0)},
      // The second stream starts from the beginning too; the fake (like the
      // coordinator) sends only the events after the requested sequence.
      {StateChange(1, run, v1::RUN_STATE_RUNNING),
       Progress(2, 10000, run, 1000000, 4.5),
       Progress(3, 20000, run, 2000000, 4.0),
       Progress(4, 30000, run, 4000000, 3.5),
       StateChange(5, run, v1::RUN_STATE_SUCCEEDED), finished}};
  std::unique_ptr<grpc::Server> server = fake.Serve();
  ASSERT_NE(server, nullptr);

  std::ostringstream out, err;
  WatchOptions options;
  options.first_backoff_seconds = 0.01;
  const int code =
      RunWatch({"sw-1", "--address", fake.address(), "--token", "t0k"}, out,
               err, options);
  EXPECT_EQ(code, kExitOk) << err.str();
  EXPECT_EQ(out.str(),
            "22:13:21 #1 run 0123456789abcdef gdn/S1 -> running\n"
            "22:13:30 #2 run 0123456789abcdef gdn/S1   10% 1.0M/10.0M tokens"
            "  loss 4.5000  step 1000\n"
            "22:13:40 #3 run 0123456789abcdef gdn/S1   20% 2.0M/10.0M tokens"
            "  loss 4.0000  step 2000  eta 1m20s\n"
            "22:13:50 #4 run 0123456789abcdef gdn/S1   40% 4.0M/10.0M tokens"
            "  loss 3.5000  step 4000  eta 40s\n"
            "22:13:25 #5 run 0123456789abcdef gdn/S1 -> succeeded\n"
            "22:15:00 #6 sweep finished: all runs succeeded\n"
            "sweep sw-1 finished: succeeded (1/1 runs succeeded, 0 failed, 0 "
            "cancelled)\n");
  EXPECT_NE(err.str().find("the stream dropped (stream dropped); "
                           "reconnecting after event #3"),
            std::string::npos)
      << err.str();
  const auto recorded = fake.recorded();
  ASSERT_EQ(recorded.watches.size(), 2u);
  EXPECT_EQ(recorded.watches[0].after_sequence(), 0);
  EXPECT_EQ(recorded.watches[1].after_sequence(), 3);
  EXPECT_TRUE(recorded.watches[1].until_done());
  for (const std::string& auth : recorded.authorization) {
    EXPECT_EQ(auth, "Bearer t0k");
  }
  server->Shutdown();
}

TEST(WatchTest, FromStartsAfterTheGivenSequence) {
  FakeClientService fake;
  SetUpSweep(&fake);
  v1::Event finished;
  finished.set_sequence(9);
  finished.set_kind(v1::SWEEP_FINISHED);
  fake.watch_streams = {{finished}};
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  EXPECT_EQ(
      RunCli({"watch", "sw-1", "--from", "7", "--address", fake.address()}, out,
             err),
      kExitOk)
      << err.str();
  EXPECT_EQ(fake.recorded().watches[0].after_sequence(), 7);
  server->Shutdown();
}

TEST(WatchTest, AnIncompleteSweepExitsWithFailure) {
  FakeClientService fake;
  SetUpSweep(&fake);
  fake.get_sweep.mutable_sweep()->set_state(v1::SWEEP_STATE_INCOMPLETE);
  fake.watch_streams = {{}};  // the server ends the stream: sweep is over
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"watch", "sw-1", "--address", fake.address()}, out, err),
            kExitFailed);
  EXPECT_NE(out.str().find("finished: incomplete"), std::string::npos);
  EXPECT_NE(err.str().find("hlab resume sw-1"), std::string::npos);
  server->Shutdown();
}

TEST(WatchTest, UnknownSweepIsOneLineError) {
  FakeClientService fake;
  fake.forced_status =
      grpc::Status(grpc::StatusCode::NOT_FOUND, "no sweep 'nope'");
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"watch", "nope", "--address", fake.address()}, out, err),
            kExitFailed);
  EXPECT_EQ(err.str(),
            "hlab watch: error: no sweep 'nope'; list sweeps with `hlab "
            "status` and runs with `hlab runs`\n");
  server->Shutdown();
}

TEST(WatchTest, InterruptStopsCleanlyWithTheSequenceToContinueFrom) {
  FakeClientService fake;
  SetUpSweep(&fake);
  fake.get_sweep.mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
  std::atomic<bool> interrupted{false};
  fake.watch_streams = {
      {StateChange(1, "0123456789abcdef", v1::RUN_STATE_RUNNING)}};
  // The server holds the stream open; "Ctrl-C" comes while it does.
  fake.on_watch_held = [&] { interrupted.store(true); };
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  WatchOptions options;
  options.interrupted = &interrupted;
  EXPECT_EQ(RunWatch({"sw-1", "--address", fake.address()}, out, err, options),
            kExitOk);
  EXPECT_EQ(Lines(err.str()), 1) << err.str();
  EXPECT_NE(err.str().find("hlab watch: stopped after event #"),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("continue with `hlab watch sw-1 --from "),
            std::string::npos);
  EXPECT_EQ(fake.recorded().watches.size(), 1u);  // no reconnect
  server->Shutdown();
}

TEST(WatchTest, AFinishFromBeforeAResumeDoesNotEndTheWatch) {
  FakeClientService fake;
  SetUpSweep(&fake);
  // The sweep ended once (a run failed), was resumed and runs again: its
  // history holds a SWEEP_FINISHED that ends nothing now.
  fake.get_sweep.mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
  const std::string run = "0123456789abcdef";
  v1::Event ended;
  ended.set_sequence(3);
  ended.set_kind(v1::SWEEP_FINISHED);
  ended.set_sweep_id("sw-1");
  ended.set_message("sweep_finished: INCOMPLETE: 0 succeeded, 1 failed");
  fake.watch_streams = {{StateChange(1, run, v1::RUN_STATE_RUNNING),
                         StateChange(2, run, v1::RUN_STATE_FAILED), ended,
                         StateChange(4, run, v1::RUN_STATE_PENDING),
                         StateChange(5, run, v1::RUN_STATE_RUNNING)}};
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  WatchOptions options;
  options.max_reconnects = 0;  // the stream's end: give up at once
  EXPECT_EQ(RunWatch({"sw-1", "--address", fake.address()}, out, err, options),
            kExitFailed);
  // Read on past the old finish, to the end of the stream.
  EXPECT_NE(out.str().find(" #5 run 0123456789abcdef gdn/S1 -> running"),
            std::string::npos)
      << out.str();
  EXPECT_NE(err.str().find("--from 5"), std::string::npos) << err.str();
  server->Shutdown();
}

TEST(ProgressViewTest, BlockShowsRunningRunsWithABar) {
  v1::Sweep sweep;
  sweep.set_sweep_id("sw-1");
  sweep.set_name("demo");
  v1::Run run;
  run.set_run_id("0123456789abcdef");
  run.set_architecture("gdn");
  run.set_scale("S1");
  run.set_tokens(10000000);
  v1::Run other = run;
  other.set_run_id("fedcba9876543210");
  ProgressView view(sweep, {run, other});
  view.Apply(Progress(1, 0, run.run_id(), 2000000, 4.0));
  view.Apply(Progress(2, 10000, run.run_id(), 5000000, 3.0));
  const std::vector<std::string> block = view.Block();
  ASSERT_EQ(block.size(), 2u);
  // Progress without a phase (an older coordinator's): training.
  EXPECT_EQ(block[0],
            "sweep sw-1 \"demo\": 0/2 succeeded, 0 on trunk, 1 training, 0 "
            "decaying, 0 evaluating, 0 waiting, 0 failed, 0 cancelled  "
            "(event #2)");
  EXPECT_EQ(block[1],
            "  0123456789abcdef gdn/S1 training   [##########..........]  50% "
            "5.0M/10.0M tokens  loss 3.0000  step 5000  eta 17s");
  EXPECT_EQ(view.last_sequence(), 2);
  EXPECT_FALSE(view.finished());
}

// Three runs of budgets 100K < 200K < 400K tokens on one shared trunk
// (1000 tokens a step, branch points at 90% of each budget: 90K, 180K,
// 360K), as `hlab up` shows them.
class SharedTrunkViewTest : public ::testing::Test {
 protected:
  SharedTrunkViewTest() {
    sweep_.set_sweep_id("sw-1");
    sweep_.set_name("demo");
    for (const auto& [id, budget] :
         {std::pair<std::string, int64_t>{kA, 100000},
          {kB, 200000},
          {kC, 400000}}) {
      v1::Run run;
      run.set_run_id(id);
      run.set_architecture("full");
      run.set_scale("S1");
      run.set_tokens(budget);
      run.set_state(v1::RUN_STATE_PENDING);
      run.set_phase(v1::RUN_PHASE_WAITING);
      runs_.push_back(run);
    }
  }

  static constexpr char kA[] = "aaaaaaaaaaaaaaaa";
  static constexpr char kB[] = "bbbbbbbbbbbbbbbb";
  static constexpr char kC[] = "cccccccccccccccc";
  v1::Sweep sweep_;
  std::vector<v1::Run> runs_;
};

TEST_F(SharedTrunkViewTest, RunsOnATrainingTrunkShowTheirOwnProgress) {
  ProgressView view(sweep_, runs_);
  // The trunk is leased at 0 s; at 60 s it is at P = 120K tokens, past a's
  // branch point: a shows min(P, 90K), b and c show P.
  view.Apply(PhaseProgress(1, 0, kA, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(2, 0, kB, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(3, 0, kC, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(4, 60000, kA, v1::RUN_PHASE_TRUNK, 90000, 3.5));
  view.Apply(PhaseProgress(5, 60000, kB, v1::RUN_PHASE_TRUNK, 120000, 3.25));
  view.Apply(PhaseProgress(6, 60000, kC, v1::RUN_PHASE_TRUNK, 120000, 3.25));
  // ETAs: a 10K left at 1500 tokens/s, b 80K and c 280K at 2000 tokens/s.
  EXPECT_EQ(
      view.Block(),
      (std::vector<std::string>{
          "sweep sw-1 \"demo\": 0/3 succeeded, 3 on trunk, 0 training, 0 "
          "decaying, 0 evaluating, 0 waiting, 0 failed, 0 cancelled  "
          "(event #6)",
          "  aaaaaaaaaaaaaaaa full/S1 on trunk   [##################..]  90% "
          "90.0K/100K tokens  loss 3.5000  step 90  eta 7s",
          "  bbbbbbbbbbbbbbbb full/S1 on trunk   [############........]  60% "
          "120K/200K tokens  loss 3.2500  step 120  eta 40s",
          "  cccccccccccccccc full/S1 on trunk   [######..............]  30% "
          "120K/400K tokens  loss 3.2500  step 120  eta 2m20s"}));
  EXPECT_EQ(view.EventLine(
                PhaseProgress(4, 60000, kA, v1::RUN_PHASE_TRUNK, 90000, 3.5)),
            "22:14:20 #4 run aaaaaaaaaaaaaaaa full/S1 on trunk   90% "
            "90.0K/100K tokens  loss 3.5000  step 90  eta 7s");
}

TEST_F(SharedTrunkViewTest, ADecayContinuesFromTheBranchPointAtItsOwnRate) {
  ProgressView view(sweep_, runs_);
  view.Apply(PhaseProgress(1, 0, kA, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(2, 0, kB, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(3, 0, kC, v1::RUN_PHASE_TRUNK, 0, 0));
  view.Apply(PhaseProgress(4, 60000, kA, v1::RUN_PHASE_TRUNK, 90000, 3.5));
  // The trunk ends at 200 s; the runs wait for their decays.
  view.Apply(PhaseProgress(5, 200000, kA, v1::RUN_PHASE_WAITING, 90000, 3.5));
  view.Apply(PhaseProgress(6, 200000, kB, v1::RUN_PHASE_WAITING, 180000, 3));
  view.Apply(PhaseProgress(7, 200000, kC, v1::RUN_PHASE_WAITING, 360000, 2.9));
  // a's decay is leased at 210 s and trains 5K tokens in 10 s.
  view.Apply(StateChange(8, kA, v1::RUN_STATE_RUNNING));
  view.Apply(PhaseProgress(9, 210000, kA, v1::RUN_PHASE_DECAYING, 90000, 3.5));
  view.Apply(PhaseProgress(10, 220000, kA, v1::RUN_PHASE_DECAYING, 95000, 3));
  EXPECT_EQ(
      view.Block(),
      (std::vector<std::string>{
          "sweep sw-1 \"demo\": 0/3 succeeded, 0 on trunk, 0 training, 1 "
          "decaying, 0 evaluating, 2 waiting, 0 failed, 0 cancelled  "
          "(event #10)",
          "  aaaaaaaaaaaaaaaa full/S1 decaying   [###################.]  95% "
          "95.0K/100K tokens  loss 3.0000  step 95  eta 10s"}));
  view.Apply(
      PhaseProgress(11, 230000, kA, v1::RUN_PHASE_EVALUATING, 100000, 2.8));
  view.Apply(StateChange(12, kA, v1::RUN_STATE_SUCCEEDED));
  EXPECT_EQ(view.Block(),
            (std::vector<std::string>{
                "sweep sw-1 \"demo\": 1/3 succeeded, 0 on trunk, 0 training, "
                "0 decaying, 0 evaluating, 2 waiting, 0 failed, 0 cancelled  "
                "(event #12)"}));
}

// The live prediction of a run's final loss is shown once the coordinator
// has one; a PREDICTIONS_UPDATED event makes watch read the runs again.
TEST(WatchTest, ShowsTheLawsPredictedFinalLoss) {
  FakeClientService fake;
  SetUpSweep(&fake);
  const std::string run = "0123456789abcdef";
  v1::RunPrediction* p = fake.list_runs.mutable_runs(0)->add_predictions();
  p->set_sweep_id("sw-1");
  p->set_generation(3);
  p->set_target("loss");
  p->set_predicted(3.25);
  p->set_lower(3.125);
  p->set_upper(3.375);
  p->set_method("profile");
  v1::Event updated;
  updated.set_sequence(2);
  updated.set_time_unix_ms(kT0 + 15000);
  updated.set_kind(v1::PREDICTIONS_UPDATED);
  updated.set_sweep_id("sw-1");
  updated.set_message(
      "predictions: generation 3 from 14 succeeded runs: 1 predictions of "
      "unfinished runs in 1.0 s");
  v1::Event finished;
  finished.set_sequence(4);
  finished.set_time_unix_ms(kT0 + 100000);
  finished.set_kind(v1::SWEEP_FINISHED);
  fake.watch_streams = {{StateChange(1, run, v1::RUN_STATE_RUNNING), updated,
                         Progress(3, 20000, run, 2000000, 4.0), finished}};
  std::unique_ptr<grpc::Server> server = fake.Serve();
  ASSERT_NE(server, nullptr);
  std::ostringstream out, err;
  ASSERT_EQ(RunWatch({"sw-1", "--address", fake.address()}, out, err, {}),
            kExitOk)
      << err.str();
  EXPECT_NE(out.str().find("#2 predictions updated: predictions: generation 3"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("#3 run 0123456789abcdef gdn/S1   20% 2.0M/10.0M "
                           "tokens  loss 4.0000  step 2000  predicted final "
                           "3.25 [3.125, 3.375]\n"),
            std::string::npos)
      << out.str();
  // ListRuns at the start, and again after the new generation.
  EXPECT_EQ(fake.recorded().list_runs.size(), 2u);
  server->Shutdown();
}

TEST(ProgressViewTest, SetPredictionsReplacesTheLawsFigure) {
  v1::Sweep sweep;
  sweep.set_sweep_id("sw-1");
  v1::Run run;
  run.set_run_id("r");
  run.add_sweep_ids("sw-1");
  run.set_tokens(1000);
  run.set_phase(v1::RUN_PHASE_TRAINING);
  ProgressView view(sweep, {run});
  EXPECT_EQ(view.Block()[1].find("predicted"), std::string::npos);
  v1::RunPrediction* other = run.add_predictions();  // another sweep's
  other->set_sweep_id("sw-0");
  other->set_target("loss");
  other->set_predicted(9);
  v1::RunPrediction* p = run.add_predictions();
  p->set_sweep_id("sw-1");
  p->set_target("loss");
  p->set_predicted(2.5);
  p->set_upper(2.75);  // the data do not bound it below
  v1::RunPrediction* longppl = run.add_predictions();
  longppl->set_sweep_id("sw-1");
  longppl->set_target("longppl");
  longppl->set_predicted(1.5);
  v1::RunPrediction* curve = run.add_predictions();  // its own curve's
  curve->set_sweep_id("sw-1");
  curve->set_target("train_loss");
  curve->set_predicted(2.875);
  curve->set_lower(2.75);
  curve->set_upper(3);
  curve->set_method("curve");
  view.SetPredictions({run});
  EXPECT_NE(view.Block()[1].find("  predicted final 2.5 [?, 2.75]  its curve: "
                                 "final train loss 2.875 [2.75, 3]"),
            std::string::npos)
      << view.Block()[1];
}

TEST(ProgressViewTest, TerminalModeRedrawsInPlace) {
  FakeClientService fake;
  SetUpSweep(&fake);
  v1::Event finished;
  finished.set_sequence(3);
  finished.set_kind(v1::SWEEP_FINISHED);
  fake.watch_streams = {
      {StateChange(1, "0123456789abcdef", v1::RUN_STATE_RUNNING),
       Progress(2, 0, "0123456789abcdef", 1000000, 4.0), finished}};
  std::unique_ptr<grpc::Server> server = fake.Serve();
  std::ostringstream out, err;
  WatchOptions options;
  options.terminal = true;
  EXPECT_EQ(RunWatch({"sw-1", "--address", fake.address()}, out, err, options),
            kExitOk);
  // The block is cleared (cursor up, erase) before each notable line.
  EXPECT_NE(out.str().find("\x1b[1F\x1b[J"), std::string::npos);
  EXPECT_NE(out.str().find("-> running\n"), std::string::npos);
  EXPECT_NE(out.str().find("[#"), std::string::npos);
  server->Shutdown();
}

}  // namespace
}  // namespace hlab::cli
