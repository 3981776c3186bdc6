// Exact resume and WSD branching, at tiny scale, on CPU with one thread.
#include "train/trainer.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "train/checkpoint_file.h"
#include "train/devices.h"
#include "train/records.h"

namespace hlab::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int64_t kBatch = 256;  // 8 sequences of 32 tokens

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hlab_trainer_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  Json BaseTask(const std::string& arch = "gdn") {
    Json j = Json::parse(R"({
      "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
                "vocab_size": 258},
      "seq_len": 32, "batch_tokens": 256,
      "optimizer": {"peak_lr": 0.01},
      "schedule": {"warmup_steps": 3, "decay_fraction": 0.2},
      "threads": 1, "log_every_steps": 1000,
      "eval": {"sequences": 0}
    })");
    j["model"]["arch"] = arch;
    j["budget_tokens"] = 12 * kBatch;
    return j;
  }

  std::string Dir(const std::string& name) { return (root_ / name).string(); }

  std::unique_ptr<Trainer> Make(const Json& j) {
    auto task = task::TrainTaskFromJson(j.dump());
    EXPECT_TRUE(task.ok()) << task.status();
    auto trainer = Trainer::Create(*task, nullptr);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return trainer.ok() ? *std::move(trainer) : nullptr;
  }

  // Runs task `j` to the end with its records written to a file; returns
  // the trainer (null, the test failed, if it could not run) and the
  // records in order in *records.
  std::unique_ptr<Trainer> RunRecorded(const Json& j,
                                       std::vector<Json>* records) {
    auto task = task::TrainTaskFromJson(j.dump());
    EXPECT_TRUE(task.ok()) << task.status();
    if (!task.ok()) return nullptr;
    const fs::path log = root_ / "records.jsonl";
    fs::create_directories(root_);
    std::FILE* out = std::fopen(log.c_str(), "w");
    EXPECT_NE(out, nullptr);
    if (out == nullptr) return nullptr;
    RecordWriter writer(out, RecordWriter::Human::kNone);
    auto trainer = Trainer::Create(*task, &writer);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    const bool ran = trainer.ok() && (*trainer)->Run().ok();
    std::fclose(out);
    EXPECT_TRUE(ran);
    if (!ran) return nullptr;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      records->push_back(Json::parse(line));
    }
    return *std::move(trainer);
  }

  fs::path root_;
};

// "threads": 0 gives a CPU rank every core and a CUDA rank at most 4: its
// host threads only launch kernels, and several ranks share one host.
TEST(DefaultIntraOpThreadsTest, AllCoresOnTheCpuAtMostFourOnCuda) {
  EXPECT_EQ(DefaultIntraOpThreads(/*cuda=*/false, 16), 16);
  EXPECT_EQ(DefaultIntraOpThreads(/*cuda=*/true, 16), 4);
  EXPECT_EQ(DefaultIntraOpThreads(/*cuda=*/true, 2), 2);
  EXPECT_EQ(DefaultIntraOpThreads(/*cuda=*/false, 0), 1);  // unknown: one
  EXPECT_EQ(DefaultIntraOpThreads(/*cuda=*/true, 0), 1);
}

TEST_F(TrainerTest, ResumeFromACheckpointReproducesEveryLossBitwise) {
  Json full = BaseTask();
  full["checkpoint"] = {{"dir", Dir("full")}};
  auto uninterrupted = Make(full);
  ASSERT_TRUE(uninterrupted->Run().ok());
  const std::vector<double> expected = uninterrupted->losses();
  ASSERT_EQ(expected.size(), 12u);

  // Stop after 5 steps (as a kill would, after the step-5 checkpoint) ...
  Json first = BaseTask();
  first["checkpoint"] = {{"dir", Dir("split")}};
  first["stop_at_tokens"] = 5 * kBatch;
  auto part1 = Make(first);
  ASSERT_TRUE(part1->Run().ok());
  // ... then resume the same task in a fresh trainer.
  Json second = BaseTask();
  second["checkpoint"] = {{"dir", Dir("split")}};
  auto part2 = Make(second);
  EXPECT_EQ(part2->start_step(), 5);
  ASSERT_TRUE(part2->Run().ok());
  std::vector<double> resumed = part1->losses();
  resumed.insert(resumed.end(), part2->losses().begin(), part2->losses().end());
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed[i], expected[i]) << "step " << i + 1;
  }
  EXPECT_EQ(part2->ParameterValues(), uninterrupted->ParameterValues());
}

TEST_F(TrainerTest, WsdDecayFromABranchEqualsTrainingTheBudgetFromScratch) {
  const int64_t small = 10 * kBatch, large = 15 * kBatch;
  // Trunk: the stable phase of the largest budget, with branch points.
  Json trunk = BaseTask();
  trunk["budget_tokens"] = large;
  trunk["branch_budgets_tokens"] = {small, large};
  trunk["checkpoint"] = {{"dir", Dir("trunk")}};
  auto t = Make(trunk);
  EXPECT_EQ(t->plan().branch_steps, (std::vector<int64_t>{8, 12}));
  ASSERT_TRUE(t->Run().ok());
  ASSERT_TRUE(fs::exists(root_ / "trunk" / BranchName(small)));
  ASSERT_TRUE(fs::exists(root_ / "trunk" / BranchName(large)));

  for (int64_t budget : {small, large}) {
    Json decay = BaseTask();
    decay["budget_tokens"] = budget;
    decay["init_from"] = (root_ / "trunk" / BranchName(budget)).string();
    decay["checkpoint"] = {{"dir", Dir("decay" + std::to_string(budget))}};
    auto d = Make(decay);
    ASSERT_TRUE(d->Run().ok());

    Json scratch = BaseTask();
    scratch["budget_tokens"] = budget;
    auto s = Make(scratch);
    ASSERT_TRUE(s->Run().ok());
    EXPECT_EQ(d->ParameterValues(), s->ParameterValues())
        << "budget " << budget;
    EXPECT_EQ(d->losses().back(), s->losses().back());
  }
}

// A trunk trained as a chain of segments (schedule_policy: adaptive, each
// from the previous one's branch checkpoint, stopping at its own) saves
// the same branch checkpoints as the whole trunk: the same losses on the
// way, bitwise, and every decay from them bitwise the whole trunk's decay.
TEST_F(TrainerTest, TrunkSegmentsEqualTheWholeTrunkBitwise) {
  const std::vector<int64_t> budgets = {10 * kBatch, 13 * kBatch, 15 * kBatch};
  Json whole = BaseTask();
  whole["budget_tokens"] = budgets.back();
  whole["branch_budgets_tokens"] = budgets;
  whole["checkpoint"] = {{"dir", Dir("whole")}};
  auto w = Make(whole);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->plan().branch_steps, (std::vector<int64_t>{8, 10, 12}));
  ASSERT_TRUE(w->Run().ok());

  std::vector<double> losses;
  std::string init_from;
  int64_t start = 0;
  for (size_t k = 0; k < budgets.size(); ++k) {
    const int64_t end = w->plan().branch_steps[k];
    Json segment = BaseTask();
    segment["budget_tokens"] = budgets.back();
    segment["branch_budgets_tokens"] = {budgets[k]};
    segment["stop_at_tokens"] = end * kBatch;
    segment["init_from"] = init_from;
    segment["checkpoint"] = {{"dir", Dir("segment" + std::to_string(k))}};
    auto s = Make(segment);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->start_step(), start);
    ASSERT_TRUE(s->Run().ok());
    losses.insert(losses.end(), s->losses().begin(), s->losses().end());
    const fs::path branch =
        root_ / ("segment" + std::to_string(k)) / BranchName(budgets[k]);
    auto meta = ReadCheckpointMeta(branch.string());
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_EQ(meta->step, end);
    // The archive's bytes are not canonical (LibTorch writes the
    // optimizer's state in no fixed order): its decay is the test.
    std::vector<std::unique_ptr<Trainer>> decays;
    for (const fs::path& from :
         {branch, root_ / "whole" / BranchName(budgets[k])}) {
      Json decay = BaseTask();
      decay["budget_tokens"] = budgets[k];
      decay["init_from"] = from.string();
      decays.push_back(Make(decay));
      ASSERT_NE(decays.back(), nullptr);
      ASSERT_TRUE(decays.back()->Run().ok());
    }
    EXPECT_EQ(decays[0]->losses(), decays[1]->losses())
        << "budget " << budgets[k];
    EXPECT_EQ(decays[0]->ParameterValues(), decays[1]->ParameterValues())
        << "budget " << budgets[k];
    if (k + 1 == budgets.size()) {
      EXPECT_EQ(s->ParameterValues(), w->ParameterValues());
    }
    init_from = branch.string();
    start = end;
  }
  EXPECT_EQ(losses, w->losses());  // bitwise, step by step
}

// A retry resumes from the newest checkpoint the coordinator recorded and
// never validates the step it resumes at, and the worker reports a step's
// points before a checkpoint of that step: so each validation must be
// written before the checkpoints of its step (a kill between them lost
// val_loss at a branch point in the chaos soak).
TEST_F(TrainerTest, EachValidationIsWrittenBeforeTheCheckpointsOfItsStep) {
  Json trunk = BaseTask();
  trunk["budget_tokens"] = 15 * kBatch;
  trunk["branch_budgets_tokens"] = {10 * kBatch, 15 * kBatch};
  trunk["checkpoint"] = {{"dir", Dir("order")}, {"every_steps", 4}};
  trunk["eval"] = {{"sequences", 8}, {"every_steps", 4}};
  std::vector<Json> records;
  auto trainer = RunRecorded(trunk, &records);
  ASSERT_NE(trainer, nullptr);

  std::set<int64_t> validated;
  int checkpoints = 0;
  for (const Json& r : records) {
    const int64_t step = r.value("step", int64_t{-1});
    if (r["type"] == "eval") validated.insert(step);
    if (r["type"] != "checkpoint") continue;
    if (r["kind"] == "latest" && step == trainer->plan().stop_step) {
      continue;  // a retry from the final checkpoint validates again
    }
    ++checkpoints;
    EXPECT_TRUE(validated.count(step))
        << r["kind"] << " checkpoint of step " << step
        << " written before its validation";
  }
  // Latest at 4 and 8, branches at 8 and 12 (the stop step); validations
  // at 4, 8 and 12.
  EXPECT_EQ(checkpoints, 4);
  EXPECT_EQ(validated, (std::set<int64_t>{4, 8, 12}));
}

// The Q-gradient hook: an "analysis" record every N steps with each
// full-attention head's q_proj gradient norm, and losses bitwise those of
// the same run without it.
TEST_F(TrainerTest, TheQGradHookLogsEveryFullHeadAndChangesNoLoss) {
  Json plain = BaseTask("swa-16");  // 2 layers: SWA then full, 2 heads
  Json hooked = plain;
  hooked["analysis"] = {{"q_grad_every_steps", 4}};
  std::vector<Json> records;
  auto with = RunRecorded(hooked, &records);
  ASSERT_NE(with, nullptr);
  auto without = Make(plain);
  ASSERT_TRUE(without->Run().ok());
  EXPECT_EQ(with->losses(), without->losses());  // bitwise

  std::vector<int64_t> steps;
  for (const Json& r : records) {
    if (r["type"] != "analysis") continue;
    steps.push_back(r["step"].get<int64_t>());
    EXPECT_EQ(r["tokens"], r["step"].get<int64_t>() * kBatch);
    const Json& norms = r["q_grad_norm"];
    ASSERT_EQ(norms.size(), 2u) << norms;  // the full layer's two heads
    for (const char* key : {"l1h0", "l1h1"}) {
      ASSERT_TRUE(norms.contains(key)) << norms;
      EXPECT_GT(norms[key].get<double>(), 0);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8, 12}));

  Json swa = BaseTask("swa-16");
  swa["model"]["arch"] = "swa:16";
  swa["analysis"] = {{"q_grad_every_steps", 4}};
  auto refused = task::TrainTaskFromJson(swa.dump());
  const absl::Status s =
      refused.ok() ? task::ValidateTrainTask(*refused) : refused.status();
  EXPECT_NE(std::string(s.message())
                .find("analysis.q_grad_every_steps: the model (arch 'swa:16') "
                      "has no full-attention head"),
            std::string::npos)
      << s;
}

// evaluation.trajectory's checkpoints: one per multiple of K steps, never
// pruned, each a "kept" record, and training unchanged bitwise; a trunk
// keeps them too, beside its branch checkpoints.
TEST_F(TrainerTest, KeptCheckpointsStayAndChangeNoLoss) {
  Json kept = BaseTask();
  kept["budget_tokens"] = 15 * kBatch;
  kept["branch_budgets_tokens"] = {10 * kBatch, 15 * kBatch};
  kept["checkpoint"] = {{"dir", Dir("kept")},
                        {"every_steps", 2},
                        {"keep_last", 1},
                        {"keep_every_steps", 5}};
  std::vector<Json> records;
  auto with = RunRecorded(kept, &records);
  ASSERT_NE(with, nullptr);
  Json plain = BaseTask();
  plain["budget_tokens"] = 15 * kBatch;
  plain["branch_budgets_tokens"] = {10 * kBatch, 15 * kBatch};
  plain["checkpoint"] = {{"dir", Dir("plain")}};
  auto without = Make(plain);
  ASSERT_TRUE(without->Run().ok());
  EXPECT_EQ(with->losses(), without->losses());  // bitwise
  // The trunk stops at step 12 (the last branch point): kept at 5 and 10.
  EXPECT_EQ(with->plan().stop_step, 12);
  std::vector<int64_t> kept_steps;
  for (const Json& r : records) {
    if (r["type"] != "checkpoint" || r["kind"] != "kept") continue;
    kept_steps.push_back(r["step"].get<int64_t>());
    EXPECT_EQ(fs::path(r["path"].get<std::string>()).filename(),
              KeptName(r["step"].get<int64_t>()));
  }
  EXPECT_EQ(kept_steps, (std::vector<int64_t>{5, 10}));
  for (int64_t step : {5, 10}) {
    auto file = ReadCheckpoint((root_ / "kept" / KeptName(step)).string());
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->meta.step, step);
    EXPECT_EQ(file->meta.kind, "kept");
  }
  // The periodic ones were pruned to keep_last = 1; the kept ones were not.
  int periodic = 0;
  for (const auto& entry : fs::directory_iterator(root_ / "kept")) {
    periodic += entry.path().filename().string().rfind("step-", 0) == 0;
  }
  EXPECT_EQ(periodic, 1);
}

TEST_F(TrainerTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  Json j = BaseTask();
  j["checkpoint"] = {{"dir", Dir("c")}, {"every_steps", 2}, {"keep_last", 3}};
  j["stop_at_tokens"] = 6 * kBatch;
  ASSERT_TRUE(Make(j)->Run().ok());
  const fs::path newest = root_ / "c" / LatestName(6);
  ASSERT_TRUE(fs::exists(newest));
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x7f');
  }
  j.erase("stop_at_tokens");
  auto resumed = Make(j);
  EXPECT_EQ(resumed->start_step(), 4);
}

TEST_F(TrainerTest, CheckpointOfAnotherModelConfigIsRefused) {
  Json j = BaseTask();
  j["checkpoint"] = {{"dir", Dir("m")}};
  j["stop_at_tokens"] = 2 * kBatch;
  ASSERT_TRUE(Make(j)->Run().ok());
  Json other = BaseTask("swa-16");
  other["checkpoint"] = {{"dir", Dir("m")}};
  auto task = task::TrainTaskFromJson(other.dump());
  ASSERT_TRUE(task.ok());
  auto trainer = Trainer::Create(*task, nullptr);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(ExitCodeFor(trainer.status()), 2);
  EXPECT_NE(
      std::string(trainer.status().message()).find("different model config"),
      std::string::npos);
}

TEST_F(TrainerTest, GradientAccumulationMatchesTheFullBatch) {
  Json whole = BaseTask("swa-16");
  whole["budget_tokens"] = 4 * kBatch;
  Json accumulated = whole;
  accumulated["micro_batch_tokens"] = 64;
  auto a = Make(whole), b = Make(accumulated);
  ASSERT_TRUE(a->Run().ok());
  ASSERT_TRUE(b->Run().ok());
  ASSERT_EQ(a->losses().size(), b->losses().size());
  for (size_t i = 0; i < a->losses().size(); ++i) {
    EXPECT_NEAR(a->losses()[i], b->losses()[i], 1e-4) << "step " << i + 1;
  }
}

TEST_F(TrainerTest, TrainingLowersHeldOutLoss) {
  Json j = BaseTask("swa-16");
  j["budget_tokens"] = 60 * kBatch;
  j["eval"] = {{"sequences", 16}};
  auto trainer = Make(j);
  const ValidationResult before = trainer->Validate();
  ASSERT_TRUE(trainer->Run().ok());
  const ValidationResult after = trainer->Validate();
  EXPECT_EQ(after.sequences, 16);
  EXPECT_EQ(after.tokens, 16 * 32);
  EXPECT_LT(after.loss, before.loss - 1.0);  // from ~ln(258) = 5.55
}

}  // namespace
}  // namespace hlab::train
