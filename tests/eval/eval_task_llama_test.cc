// EVAL tasks with a Hugging Face Llama as the LongPPL reference
// (reference.hf_dir): key tokens selected by a tiny random Llama written as
// config.json + model.safetensors, the cache, --check, refusals by name,
// and a Llama of another tokenizer selecting across tokenizers.
#include <string>

#include "eval/eval_task.h"
#include "eval_task_fixture.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"
#include "model/llama/llama_config.h"
#include "tests/data/test_util.h"
#include "tests/model/llama_test_util.h"
#include "train/trainer.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::EvalTaskRunTest;
using testing::FindRecord;
using testing::Parse;

// A Hugging Face Llama as the reference (reference.hf_dir): a tiny random
// one of the byte vocabulary, written as config.json + model.safetensors.
TEST_F(EvalTaskRunTest, ALlamaReferenceSelectsKeyTokensAndIsCached) {
  model::llama::testing::TinyLlama llama;
  llama.vocab = 258;
  const std::string llama_dir = (dir_ / "llama").string();
  llama.Write(llama_dir);
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  j["evals"]["longppl"]["alpha"] = -100.0;  // every candidate is key
  j["evals"]["longppl"]["beta"] = -100.0;
  j["evals"]["longppl"]["context_len"] = 128;
  j["allow_extrapolation"] = true;
  ASSERT_TRUE(Run(j).ok());
  const Json first = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(first.is_null());
  const Json& d = first["details"];
  EXPECT_EQ(d["cache"], "miss");
  EXPECT_EQ(d["reference"]["hf_dir"], llama_dir);
  EXPECT_EQ(d["reference"]["weights"], "model.safetensors");
  EXPECT_EQ(d["reference"]["dtype"], "fp32");
  EXPECT_EQ(d["reference"]["device"], "cpu");
  EXPECT_EQ(d["reference"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(d["key_tokens"], d["candidate_tokens"]);
  EXPECT_GT(d["key_tokens"].get<int64_t>(), 0);
  // No tokenizer.json: only the sizes were compared, and it says so.
  bool warned = false;
  for (const Json& r : records_) {
    if (r["type"] == "warning" &&
        r.dump().find("has no tokenizer.json") != std::string::npos) {
      warned = true;
    }
  }
  EXPECT_TRUE(warned);
  // The same weights again: the selection comes from the cache; other
  // weights (another seed) miss it.
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(FindRecord(records_, "result", "log_longppl")["details"]["cache"],
            "hit");
  model::llama::testing::TinyLlama other = llama;
  other.seed = 8;
  other.Generate();
  other.Write(llama_dir);
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(FindRecord(records_, "result", "log_longppl")["details"]["cache"],
            "miss");

  // --check reads the config and the tensors without the values.
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  auto plan = CheckEvalTask(*task);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Json p = Json::parse(*plan);
  EXPECT_EQ(p["evals"]["longppl"]["reference"]["hf_dir"], llama_dir);
  EXPECT_EQ(p["evals"]["longppl"]["reference"]["parameters"],
            model::llama::LlamaParameterCount(
                *model::llama::ReadLlamaConfig(llama_dir)));
}

TEST_F(EvalTaskRunTest, ALlamaOfAnotherVocabularyIsRefusedByName) {
  model::llama::testing::TinyLlama llama;  // 37 tokens, not the byte 258
  const std::string llama_dir = (dir_ / "llama37").string();
  llama.Write(llama_dir);
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message())
                .find("evals.longppl.reference.hf_dir: vocab/tokenizer "
                      "differ: the Llama in " +
                      llama_dir + " has a vocabulary of 37 tokens"),
            std::string::npos)
      << s;
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(CheckEvalTask(*task).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A directory without weights is named too.
  fs::remove(llama_dir + "/model.safetensors");
  s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(
      std::string(s.message()).rfind("evals.longppl.reference.hf_dir: ", 0), 0u)
      << s;
}

// A Llama of another tokenizer (Llama 3's 128256 ids, its tokenizer.json
// from the shared data) selects for a byte-level model: its key tokens
// pass as character ranges.
TEST_F(EvalTaskRunTest, ALlamaOfAnotherTokenizerSelectsAcrossTokenizers) {
  const std::string llama3 =
      data::testing::SharedDataPath("tokenizers/llama3/tokenizer.json");
  if (llama3.empty()) {
    GTEST_SKIP() << "needs " << data::testing::SharedDataDir()
                 << "/tokenizers/llama3; set HLAB_SHARED_DIR";
  }
  model::llama::testing::TinyLlama llama;
  llama.vocab = 128256;
  llama.d = 8;
  llama.heads = 2;
  llama.kv_heads = 1;
  llama.head_dim = 4;
  llama.ffn = 16;
  llama.layers = 1;
  const std::string llama_dir = (dir_ / "llama3").string();
  llama.Write(llama_dir);
  fs::copy_file(llama3, llama_dir + "/tokenizer.json");
  fs::copy_file(fs::path(llama3).parent_path() / "tokenizer_config.json",
                llama_dir + "/tokenizer_config.json");
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  j["evals"]["longppl"]["alpha"] = -100.0;  // every candidate is key
  j["evals"]["longppl"]["beta"] = -100.0;
  j["evals"]["longppl"]["trunc_len"] = 4;  // Llama tokens
  j["evals"]["longppl"]["sliding_window"] = 2;
  j["evals"]["longppl"]["context_len"] = 128;
  j["allow_extrapolation"] = true;
  const absl::Status status = Run(j);
  ASSERT_TRUE(status.ok()) << status;
  const Json r = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(r.is_null());
  const Json& d = r["details"];
  EXPECT_EQ(d["reference"]["tokenizer"].get<std::string>().rfind("hf:", 0), 0u)
      << d.dump();
  // Every byte after the Llama's first 4 tokens is key: as many key tokens
  // as candidates, and at least one document scored.
  EXPECT_GT(d["key_tokens"].get<int64_t>(), 0) << d.dump();
  EXPECT_EQ(d["key_tokens"], d["candidate_tokens"]) << d.dump();
  EXPECT_GE(d["documents"].get<int64_t>(), 1) << d.dump();
  EXPECT_TRUE(r["value"].is_number()) << r.dump();
}

}  // namespace
}  // namespace hlab::eval
