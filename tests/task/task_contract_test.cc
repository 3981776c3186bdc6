// The task contract's one reader and one writer (task/json_fields.h): every
// field of TrainTask, EvalTask and RunConfig survives struct -> JSON ->
// struct, the reader knows exactly the keys the writer writes, and every
// field is in its --help text.
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "task/eval_task.h"
#include "task/run_config.h"
#include "task/train_task.h"

namespace hlab::task {
namespace {

using Json = nlohmann::json;

// Leaves of a JSON object by path ("optimizer.peak_lr"); the model config
// is one leaf (model/config has its own round-trip tests).
void Flatten(const Json& j, const std::string& path,
             std::map<std::string, Json>* out) {
  if (j.is_object() && path != "model" && path != "config.model") {
    for (const auto& item : j.items()) {
      Flatten(item.value(), path.empty() ? item.key() : path + "." + item.key(),
              out);
    }
    return;
  }
  (*out)[path] = j;
}

std::map<std::string, Json> Leaves(const Json& j) {
  std::map<std::string, Json> out;
  Flatten(j, "", &out);
  return out;
}

// Every field away from its default.
TrainTask FilledTrainTask() {
  TrainTask t;
  t.name = "filled";
  t.model = *model::ModelConfigFromJson(
      R"({"arch": "swa-8", "d_model": 32, "n_layers": 2, "n_heads": 2,
          "n_kv_heads": 1, "vocab_size": 300})");
  t.match_params = true;
  t.data.source = "prepared";
  t.data.seed = 7;
  t.data.long_fraction = 0.25;
  t.data.synthetic.long_min_tokens = 65;
  t.data.synthetic.long_max_tokens = 90;
  t.data.synthetic.short_min_tokens = 17;
  t.data.synthetic.short_max_tokens = 20;
  t.data.synthetic.min_distance = 9;
  t.data.synthetic.binding_rate = 0.5;
  t.data.synthetic.short_binding_rate = 0.25;
  t.data.long_dir = "/data/long";
  t.data.short_dir = "/data/short";
  t.seq_len = 64;
  t.batch_tokens = 512;
  t.micro_batch_tokens = 128;
  t.budget_tokens = 40960;
  t.optimizer.peak_lr = 1e-3;
  t.optimizer.beta1 = 0.8;
  t.optimizer.beta2 = 0.99;
  t.optimizer.eps = 1e-6;
  t.optimizer.weight_decay = 0.05;
  t.optimizer.grad_clip = 0.5;
  t.schedule.warmup_steps = 3;
  t.schedule.decay_fraction = 0.2;
  t.schedule.decay_shape = DecayShape::kOneMinusSqrt;
  t.schedule.min_lr_ratio = 0.05;
  t.stop_at_tokens = 20480;
  t.branch_budgets_tokens = {20480, 40960};
  t.init_from = "/branch.ckpt";  // not with branches in a valid task
  t.checkpoint.dir = "/ckpt";
  t.checkpoint.every_steps = 5;
  t.checkpoint.keep_last = 3;
  t.checkpoint.keep_every_steps = 20;
  t.checkpoint.resume_max_step = 10;
  t.resume = false;
  t.seed = 11;
  t.threads = 2;
  t.device = "cuda";
  t.bf16 = true;
  t.log_every_steps = 4;
  t.eval.every_steps = 6;
  t.eval.sequences = 8;
  t.analysis.q_grad_every_steps = 7;
  return t;
}

EvalTask FilledEvalTask() {
  EvalTask e;
  e.task_id = "eval-1";
  e.run_id = "abc";
  e.step = 12;
  e.checkpoint = "/ckpt/step-12.ckpt";
  e.run = FilledTrainTask();
  e.run.branch_budgets_tokens.clear();  // the config is validated
  e.evals.val_loss.emplace();
  e.evals.val_loss->tokens = 1024;
  e.evals.val_loss->batch_sequences = 4;
  e.evals.val_loss->data.jsonl = "/texts.jsonl";
  e.evals.val_loss->data.text_field = "body";
  e.evals.val_loss->data.split = "train";
  e.evals.val_loss->data.tokenizer = "byte";
  e.evals.val_loss->data.prepared = "/also";  // one of the two, if valid
  e.evals.val_loss->documents = "long";       // (valid without data)
  e.evals.longppl.emplace();
  LongPplSpec& l = *e.evals.longppl;
  l.trunc_len = 8;
  l.sliding_window = 4;
  l.context_len = 32;
  l.alpha = 1.5;
  l.beta = -1.5;
  l.min_key_tokens = 3;
  l.documents = 5;
  l.reference.run_id = "ref";
  l.reference.checkpoint_path = "/ref.ckpt";
  l.reference.checkpoint = "/resolved/ref.ckpt";
  l.reference.hf_dir = "/models/llama";  // with checkpoint, if valid
  l.reference.dtype = "bf16";
  l.reference.tokenizer = "gpt2:/tok";  // with hf_dir, if valid
  l.data.prepared = "/prepared";
  l.data.jsonl = "/also.jsonl";
  l.data.tokenizer = "gpt2";
  l.data.text_field = "t";
  l.data.split = "train";
  l.aggregation = "per_document";
  l.key_tokens.file = "/keys.jsonl";  // with slices, if valid
  l.key_tokens.slices = "/key_text";
  l.key_tokens.texts = "/texts.jsonl";
  l.key_tokens.tokenizer = "byte";
  e.evals.niah.emplace();
  e.evals.niah->kinds = {"single", "passkey"};
  e.evals.niah->context_lengths = {32, 64};
  e.evals.niah->depths = {0.25};
  e.evals.niah->samples = 3;
  e.evals.niah->candidates = 4;
  e.evals.niah->seed = 9;
  e.evals.niah->greedy = true;
  e.evals.niah->haystack = "synthetic";
  e.evals.niah->tokenizer = "byte";
  e.evals.receptive_field.emplace();
  e.evals.receptive_field->limit = 8;
  e.evals.gradient_profile.emplace();
  e.evals.gradient_profile->sequences = 2;
  e.evals.gradient_profile->batch_sequences = 1;
  e.evals.probing.emplace();
  e.evals.probing->samples = 40;
  e.evals.probing->context_length = 48;
  e.evals.probing->depths = {0.25};
  e.evals.probing->classes = 4;
  e.evals.probing->test_fraction = 0.5;
  e.evals.probing->l2 = 0.5;
  e.evals.probing->seed = 9;
  e.evals.probing->batch_sequences = 2;
  e.evals.probing->tokenizer = "byte";
  e.evals.retrieval_heads.emplace();
  e.evals.retrieval_heads->samples = 12;
  e.evals.retrieval_heads->context_length = 40;
  e.evals.retrieval_heads->depths = {0.75};
  e.evals.retrieval_heads->top_heads = 3;
  e.evals.retrieval_heads->seed = 4;
  e.evals.retrieval_heads->tokenizer = "byte";
  e.evals.multiple_choice.emplace();
  MultipleChoiceTaskSpec mc;
  mc.name = "arc_easy";
  mc.file = "/data/arc.jsonl";
  mc.fewshot_file = "/data/arc_train.jsonl";
  mc.num_fewshot = 5;
  mc.target_delimiter = ": ";
  mc.fewshot_delimiter = "\n";
  mc.limit = 100;
  e.evals.multiple_choice->tasks = {mc};
  e.evals.multiple_choice->seed = 7;
  e.evals.multiple_choice->tokenizer = "byte";
  e.evals.ruler.emplace();
  e.evals.ruler->tasks = {"vt", "qa_1"};
  e.evals.ruler->lengths = {48, 64};
  e.evals.ruler->samples = 3;
  e.evals.ruler->seed = 6;
  e.evals.ruler->tokens_to_generate = 7;
  e.evals.ruler->essay_file = "/essay.txt";
  e.evals.ruler->squad_file = "/squad.json";
  e.evals.ruler->hotpotqa_file = "/hotpot.json";
  e.evals.ruler->tokenizer = "byte";
  e.cache_dir = "/cache";
  e.threads = 3;
  e.allow_extrapolation = true;
  return e;
}

RunConfig FilledRunConfig() {
  RunConfig r;
  r.model = FilledTrainTask().model;
  r.seq_len = 64;
  r.batch_tokens = 512;
  r.tokens = 40960;
  r.steps = 80;
  r.seed = 5;
  r.data.source = "prepared";
  r.data.path = "/prepared";
  r.data.seed = 3;  // not both in a real config; here every field
  r.data.corpus_version = kSyntheticCorpusVersion;
  r.data.long_fraction = 0.75;
  r.schedule.kind = "wsd2";
  r.schedule.peak_lr = 2e-3;
  r.schedule.warmup_steps = 4;
  r.schedule.decay_fraction = 0.3;
  r.schedule.decay_shape = "cosine";
  r.schedule.min_lr_ratio = 0.2;
  r.schedule.weight_decay = 0.01;
  r.schedule.grad_clip = 2.0;
  return r;
}

// Every leaf of `filled` differs from (or is absent in) `defaults`: the
// fixture sets every field the writer writes.
void ExpectEveryFieldSet(const Json& filled, const Json& defaults) {
  const auto d = Leaves(defaults);
  for (const auto& [path, value] : Leaves(filled)) {
    auto it = d.find(path);
    EXPECT_TRUE(it == d.end() || it->second != value)
        << path << " is at its default (" << value.dump()
        << "): set it in the fixture";
  }
}

// The reader knows exactly the writer's keys: each written key may be left
// out (its default stays, or the field is refused by name), and a key
// beside it that no field names is refused, naming its path.
void ExpectReaderKnowsTheWrittenKeys(
    const Json& written, const std::function<absl::Status(const Json&)>& read) {
  ASSERT_TRUE(read(written).ok()) << read(written);
  for (const auto& [path, value] : Leaves(written)) {
    Json without = written;
    Json with = written;
    const std::string parent = path.find('.') == std::string::npos
                                   ? ""
                                   : path.substr(0, path.rfind('.'));
    const std::string key = path.substr(path.rfind('.') + 1);
    std::string pointer;
    for (char c : parent) pointer += c == '.' ? '/' : c;
    if (!pointer.empty()) pointer = "/" + pointer;
    without[Json::json_pointer(pointer)].erase(key);
    // Absent, it keeps its default, or is refused by name (a required
    // field, or one whose default the rest of this fixture rules out).
    const absl::Status absent = read(without);
    EXPECT_TRUE(absent.ok() ||
                std::string(absent.message()).find(key) != std::string::npos)
        << "without " << path << ": " << absent;
    with[Json::json_pointer(pointer)][key + "_x"] = 1;
    const absl::Status refused = read(with);
    EXPECT_NE(std::string(refused.message()).find(path + "_x: unknown field"),
              std::string::npos)
        << path << "_x: " << refused;
  }
}

TEST(TaskContractTest, EveryTrainTaskFieldRoundTrips) {
  const TrainTask filled = FilledTrainTask();
  const std::string once = TrainTaskToJson(filled);
  const TrainTask defaults;
  ExpectEveryFieldSet(Json::parse(once),
                      Json::parse(TrainTaskToJson(defaults)));
  absl::StatusOr<TrainTask> back = ReadTrainTask(Json::parse(once));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(TrainTaskToJson(*back), once);
  EXPECT_EQ(back->schedule.decay_shape, DecayShape::kOneMinusSqrt);
  EXPECT_EQ(back->data.synthetic.binding_rate, 0.5);
  EXPECT_EQ(back->checkpoint.resume_max_step, 10);
}

TEST(TaskContractTest, EveryEvalTaskFieldRoundTrips) {
  const EvalTask filled = FilledEvalTask();
  const std::string once = EvalTaskToJson(filled);
  EvalTask defaults;
  defaults.evals.val_loss.emplace();
  defaults.evals.longppl.emplace();
  defaults.evals.niah.emplace();
  defaults.evals.receptive_field.emplace();
  defaults.evals.gradient_profile.emplace();
  defaults.evals.probing.emplace();
  defaults.evals.retrieval_heads.emplace();
  defaults.evals.multiple_choice.emplace();
  defaults.evals.ruler.emplace();
  Json d = Json::parse(EvalTaskToJson(defaults));
  d.erase("config");  // the run is TrainTask's (above)
  Json f = Json::parse(once);
  f.erase("config");
  f.erase("kind");  // "eval" is the only kind
  ExpectEveryFieldSet(f, d);
  absl::StatusOr<EvalTask> back = ReadEvalTask(Json::parse(once));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EvalTaskToJson(*back), once);
  EXPECT_EQ(back->evals.Names(), AllEvalNames());
  EXPECT_EQ(back->evals.longppl->reference.File(), "/resolved/ref.ckpt");
}

TEST(TaskContractTest, EveryRunConfigFieldRoundTrips) {
  const std::string once = RunConfigToJson(FilledRunConfig());
  const RunConfig defaults;
  Json f = Json::parse(once);
  f.erase("format");  // hlab.run.v1 is the only format
  ExpectEveryFieldSet(f, Json::parse(RunConfigToJson(defaults)));
  absl::StatusOr<RunConfig> back = RunConfigFromJson(once);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(RunConfigToJson(*back), once);
}

TEST(TaskContractTest, TheReaderKnowsExactlyTheWrittenKeys) {
  ExpectReaderKnowsTheWrittenKeys(
      Json::parse(TrainTaskToJson(FilledTrainTask())),
      [](const Json& j) { return ReadTrainTask(j).status(); });
  ExpectReaderKnowsTheWrittenKeys(
      Json::parse(EvalTaskToJson(FilledEvalTask())),
      [](const Json& j) { return ReadEvalTask(j).status(); });
  ExpectReaderKnowsTheWrittenKeys(
      Json::parse(RunConfigToJson(FilledRunConfig())),
      [](const Json& j) { return ReadRunConfig(j, "").status(); });
}

TEST(TaskContractTest, EveryFieldIsInTheHelp) {
  for (const auto& [path, value] :
       Leaves(Json::parse(TrainTaskToJson(FilledTrainTask())))) {
    const std::string key = path.substr(path.rfind('.') + 1);
    EXPECT_NE(std::string(kTaskFieldsHelp).find(key), std::string::npos)
        << path << " is not in kTaskFieldsHelp (hlab-train --help)";
  }
  Json eval = Json::parse(EvalTaskToJson(FilledEvalTask()));
  eval.erase("config");
  for (const auto& [path, value] : Leaves(eval)) {
    const std::string key = path.substr(path.rfind('.') + 1);
    EXPECT_NE(std::string(kEvalTaskFieldsHelp).find(key), std::string::npos)
        << path << " is not in kEvalTaskFieldsHelp (hlab-eval --help)";
  }
}

// The tasks of evals.multiple_choice are a list of objects, which the
// leaf-wise tests above take whole: each of a task's fields is set away
// from its default, read back, in the help, and a stray key is named.
TEST(TaskContractTest, MultipleChoiceTaskFieldsRoundTrip) {
  const Json filled = Json::parse(EvalTaskToJson(FilledEvalTask()));
  const Json& task = filled["evals"]["multiple_choice"]["tasks"][0];
  const Json defaults = JsonFieldWriter::Write(MultipleChoiceTaskSpec());
  ASSERT_EQ(task.size(), defaults.size());
  for (const auto& item : defaults.items()) {
    ASSERT_TRUE(task.contains(item.key())) << item.key();
    EXPECT_NE(task[item.key()], item.value()) << item.key();
    EXPECT_NE(std::string(kEvalTaskFieldsHelp).find(item.key()),
              std::string::npos)
        << item.key() << " is not in kEvalTaskFieldsHelp";
  }
  Json stray = filled;
  stray["evals"]["multiple_choice"]["tasks"][0]["filex"] = 1;
  EXPECT_NE(std::string(ReadEvalTask(stray).status().message())
                .find("evals.multiple_choice.tasks[0].filex: unknown field"),
            std::string::npos);
}

TEST(TaskContractTest, MultipleChoiceTasksAreChecked) {
  const auto error = [](const Json& mc) {
    EvalTask t = FilledEvalTask();
    Json j = Json::parse(EvalTaskToJson(t));
    j["evals"] = {{"multiple_choice", mc}};
    return std::string(EvalTaskFromJson(j.dump()).status().message());
  };
  EXPECT_EQ(
      error({{"tasks", Json::array()}})
          .rfind("evals.multiple_choice.tasks: must list at least one task", 0),
      0u);
  EXPECT_EQ(error({{"tasks", {{{"name", "a"}}}}})
                .rfind("evals.multiple_choice.tasks[0].file: is required", 0),
            0u);
  EXPECT_EQ(error({{"tasks",
                    {{{"file", "/d/arc.jsonl"}}, {{"file", "/e/arc.jsonl"}}}}})
                .rfind("evals.multiple_choice.tasks[1].name: 'arc' names two "
                       "tasks",
                       0),
            0u);
  EXPECT_EQ(error({{"tasks", {{{"file", "q.jsonl"}, {"name", "a b"}}}}})
                .rfind("evals.multiple_choice.tasks[0].name: 'a b' must be "
                       "letters",
                       0),
            0u);
  EXPECT_EQ(error({{"tasks", {{{"file", "q.jsonl"}, {"num_fewshot", 2}}}}})
                .rfind("evals.multiple_choice.tasks[0].fewshot_file: is "
                       "required with num_fewshot > 0",
                       0),
            0u);
  EXPECT_EQ(error({{"tasks", {{{"file", "q.jsonl"}, {"limit", -1}}}}})
                .rfind("evals.multiple_choice.tasks[0].limit: must be >= 0", 0),
            0u);
  EXPECT_EQ(error({{"tasks", {{{"file", "/d/piqa.valid.jsonl"}}}}}), "");
  MultipleChoiceTaskSpec unnamed;
  unnamed.file = "/d/piqa.valid.jsonl";
  EXPECT_EQ(MultipleChoiceTaskName(unnamed), "piqa");
  unnamed.name = "piqa_5shot";
  EXPECT_EQ(MultipleChoiceTaskName(unnamed), "piqa_5shot");
}

// What the coordinator does at lease time: a run's config becomes the task
// hlab-train validates, with the run's numbers.
TEST(TaskContractTest, ARunConfigBecomesItsTrainingTask) {
  RunConfig run;
  run.model = FilledTrainTask().model;
  run.model.vocab_size = 100;  // below the byte vocabulary
  run.seq_len = 64;
  run.batch_tokens = 512;
  run.tokens = 40960;
  run.seed = 4;
  run.data.seed = 2;
  run.schedule.warmup_steps = 3;
  run.schedule.decay_shape = "cosine";
  absl::StatusOr<TrainTask> t = TrainTaskForRun(run);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model.vocab_size, kByteVocab);
  EXPECT_EQ(t->budget_tokens, 40960);
  EXPECT_EQ(t->data.seed, 2u);
  EXPECT_EQ(t->seed, 4u);
  EXPECT_EQ(t->schedule.decay_shape, DecayShape::kCosine);
  EXPECT_TRUE(ValidateTrainTask(*t).ok()) << ValidateTrainTask(*t);

  run.data.source = "prepared";
  run.data.seed.reset();
  run.data.path = "/p";
  t = TrainTaskForRun(run);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->model.vocab_size, 100);
  EXPECT_EQ(t->data.long_dir, "/p/long");
  EXPECT_EQ(t->data.short_dir, "/p/short");

  run.schedule.decay_shape = "exp";
  EXPECT_NE(std::string(TrainTaskForRun(run).status().message())
                .find("schedule.decay_shape"),
            std::string::npos);
}

TEST(TaskContractTest, AnEvalTaskReadsEitherFormOfItsConfig) {
  EvalTask e = FilledEvalTask();
  Json j = Json::parse(EvalTaskToJson(e));
  j["config"] = Json::parse(RunConfigToJson(FilledRunConfig()));
  j["config"]["data"].erase("seed");
  absl::StatusOr<EvalTask> back = ReadEvalTask(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->run.seq_len, 64);
  EXPECT_EQ(back->run.data.long_dir, "/prepared/long");

  // A sparse run config (only what an evaluation reads) writes as a task
  // that reads back to the same text: what the worker does to a lease.
  Json sparse = j;
  sparse["config"] = {{"format", "hlab.run.v1"},
                      {"model", j["config"]["model"]},
                      {"seq_len", 32},
                      {"data", {{"corpus_version", kSyntheticCorpusVersion}}}};
  absl::StatusOr<EvalTask> once = ReadEvalTask(sparse);
  ASSERT_TRUE(once.ok()) << once.status();
  absl::StatusOr<EvalTask> twice =
      ReadEvalTask(Json::parse(EvalTaskToJson(*once)));
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(EvalTaskToJson(*twice), EvalTaskToJson(*once));

  // A synthetic run of the v1 corpus (made before the field existed)
  // cannot be evaluated on today's corpus: the error says what to do.
  Json v1 = sparse;
  v1["config"].erase("data");
  const std::string absent(ReadEvalTask(v1).status().message());
  EXPECT_NE(absent.find("config.data.corpus_version: the run was made on "
                        "synthetic corpus v1 (the field is absent)"),
            std::string::npos)
      << absent;
  EXPECT_NE(absent.find("Submit the sweep again"), std::string::npos);
  v1["config"]["data"] = {{"corpus_version", 2}};
  EXPECT_NE(std::string(ReadEvalTask(v1).status().message())
                .find("synthetic corpus v2, but this hlab generates only v3"),
            std::string::npos);

  j["config"]["format"] = "hlab.run.v0";
  EXPECT_NE(std::string(ReadEvalTask(j).status().message())
                .find("config.format: must be \"hlab.run.v1\""),
            std::string::npos);
  j["config"] = Json::parse(TrainTaskToJson(FilledTrainTask()));
  j["config"]["seq_len"] = "long";
  EXPECT_NE(std::string(ReadEvalTask(j).status().message())
                .find("config.seq_len: must be an integer"),
            std::string::npos)
      << ReadEvalTask(j).status();
}

}  // namespace
}  // namespace hlab::task
