// hlab-bench-eval: evaluation throughput per architecture (tokens/s of
// batched inference scoring), and the cost of LongPPL's key-token
// selection pass relative to one scoring pass over the same documents.
//
//   build/bin/hlab-bench-eval                    # default grid
//   build/bin/hlab-bench-eval --seq-len 512 --d-model 128 --repeats 3
//   # the demo's S4 model:
//   build/bin/hlab-bench-eval --seq-len 128 --d-model 72 --layers 2
//       --heads 4 --kv-heads 2 --arch swa-64 --probe-samples 512
//
// Every architecture gets the same seeded width and depth and the same
// synthetic held-out long documents (cut to seq_len). The architectures are
// measured round-robin, `repeats` times after one untimed round, and the
// median is reported. Times are this process's CPU time (with --threads 1,
// the compute itself), so a machine shared with other jobs does not skew
// them; --wall reports wall-clock time instead.
// Selection: K = seq_len / 4, W = seq_len / 16 (the evaluator's defaults).
// The receptive-field constraint (appendix D.1, H = seq_len / 8): one
// scoring pass with the full layers restricted and one with the efficient
// layers' overlapping windows, each as a multiple of the plain pass. The
// gradient profile (appendix D.3) of the same documents, as a multiple of
// the plain pass; layer-wise probing (appendix D.2) of --probe-samples
// synthetic NIAH samples at seq_len (features and a probe per layer), in
// seconds; retrieval-head tracing (appendix D.4) of 64 such samples, in
// seconds ("-" for a model without full attention).
//
// --generate measures greedy generation instead: --new-tokens tokens (64)
// after a prompt of seq_len tokens, batch 1, with the cache
// (ModelScorer::Generate) and by prefix re-computation (TokenScorer's
// default, one forward of the whole prefix per token), side by side in
// each round, as tokens/s and their ratio, and whether the two gave the
// same tokens.
//   build/bin/hlab-bench-eval --generate             # 512 + 64 tokens
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/openmp_env.h"
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "eval/gradient_profile.h"
#include "eval/longppl.h"
#include "eval/probing.h"
#include "eval/retrieval_heads.h"
#include "eval/token_scorer.h"
#include "model/config/model_config.h"
#include "model/hybrid_lm.h"
#include "train/malloc_reuse.h"

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  int64_t seq_len = 512, d_model = 128, layers = 4, documents = 8;
  int64_t batch = 8, repeats = 3, threads = 0, probe_samples = 128;
  int64_t heads = 0, kv_heads = 0;  // 0: d_model / 32, d_model / 64
  std::vector<std::string> archs = {"full", "swa-64", "lightning", "mamba2",
                                    "gdn"};
  bool json = false;
  bool generate = false;
  int64_t new_tokens = 64;
};

bool g_wall = false;

// Now, in seconds: process CPU time, or wall-clock time with --wall.
double Now() {
  if (g_wall) {
    return std::chrono::duration<double>(Clock::now().time_since_epoch())
        .count();
  }
  timespec t;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

hlab::model::ModelConfig ConfigFor(const Options& o, const std::string& arch) {
  auto config = hlab::model::ModelConfigFromJson(Json{
      {"arch", arch},
      {"d_model", o.d_model},
      {"n_layers", o.layers},
      {"n_heads", o.heads > 0 ? o.heads : std::max<int64_t>(1, o.d_model / 32)},
      {"n_kv_heads",
       o.kv_heads > 0 ? o.kv_heads : std::max<int64_t>(1, o.d_model / 64)},
      {"vocab_size", 258}}.dump());
  if (!config.ok()) {
    std::cerr << "hlab-bench-eval: " << arch << ": " << config.status() << "\n";
    std::exit(2);
  }
  return *config;
}

struct Figures {
  std::vector<double> score_tps, select_s, score_s, rf_full_s, rf_efficient_s,
      gradient_s, probe_s, heads_s;
};

// Reads the flags; prints the usage and exits (0 for --help, else 2) on a
// bad one.
Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](int64_t* out) {
      if (i + 1 >= argc || !absl::SimpleAtoi(argv[++i], out) || *out < 1) {
        std::cerr << "hlab-bench-eval: " << arg
                  << " needs a positive integer\n";
        std::exit(2);
      }
    };
    if (arg == "--seq-len") {
      number(&o.seq_len);
    } else if (arg == "--d-model") {
      number(&o.d_model);
    } else if (arg == "--layers") {
      number(&o.layers);
    } else if (arg == "--documents") {
      number(&o.documents);
    } else if (arg == "--batch") {
      number(&o.batch);
    } else if (arg == "--repeats") {
      number(&o.repeats);
    } else if (arg == "--threads") {
      number(&o.threads);
    } else if (arg == "--heads") {
      number(&o.heads);
    } else if (arg == "--kv-heads") {
      number(&o.kv_heads);
    } else if (arg == "--probe-samples") {
      number(&o.probe_samples);
    } else if (arg == "--arch") {
      if (i + 1 >= argc) std::exit(2);
      o.archs = {argv[++i]};
    } else if (arg == "--new-tokens") {
      number(&o.new_tokens);
    } else if (arg == "--generate") {
      o.generate = true;
    } else if (arg == "--wall") {
      g_wall = true;
    } else if (arg == "--json") {
      o.json = true;
    } else {
      std::cerr << "usage: hlab-bench-eval [--seq-len N] [--d-model N] "
                   "[--layers N] [--documents N] [--batch N] [--repeats N] "
                   "[--threads N] [--heads N] [--kv-heads N] "
                   "[--probe-samples N] [--arch A] [--wall] "
                   "[--json] [--generate [--new-tokens N]]\n";
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  return o;
}

// --generate: cached generation against prefix re-computation per
// architecture; prints a table (or JSON) and returns the exit code.
int BenchGenerate(const Options& o, const std::vector<int32_t>& prompt) {
  struct Row {
    std::vector<double> cached_tps, recomputed_tps;
    bool same = true;
  };
  std::map<std::string, hlab::model::HybridLM> models;
  std::map<std::string, Row> rows;
  for (const std::string& arch : o.archs) {
    torch::manual_seed(0);
    models.emplace(arch, hlab::model::HybridLM(ConfigFor(o, arch)));
  }
  hlab::eval::GenerateOptions options;
  options.max_new_tokens = o.new_tokens;
  for (int64_t rep = 0; rep <= o.repeats; ++rep) {  // round 0: warm-up
    for (const std::string& arch : o.archs) {
      hlab::eval::ModelScorer scorer(models.at(arch));
      double start = Now();
      auto cached = scorer.Generate(prompt, options);
      const double cached_s = Now() - start;
      start = Now();
      auto recomputed = scorer.TokenScorer::Generate(prompt, options);
      const double recomputed_s = Now() - start;
      if (!cached.ok() || !recomputed.ok()) {
        std::cerr << "hlab-bench-eval: " << arch << ": "
                  << (cached.ok() ? recomputed.status() : cached.status())
                  << "\n";
        return 1;
      }
      Row& row = rows[arch];
      row.same = row.same && *cached == *recomputed;
      if (rep == 0) continue;
      row.cached_tps.push_back(static_cast<double>(cached->size()) / cached_s);
      row.recomputed_tps.push_back(static_cast<double>(recomputed->size()) /
                                   recomputed_s);
    }
  }
  Json out = Json::array();
  if (!o.json) {
    std::printf(
        "generation: prompt %lld, %lld new tokens, batch 1; d_model %lld, "
        "%lld layers, %d threads; median of %lld; %s time\n",
        static_cast<long long>(o.seq_len), static_cast<long long>(o.new_tokens),
        static_cast<long long>(o.d_model), static_cast<long long>(o.layers),
        at::get_num_threads(), static_cast<long long>(o.repeats),
        g_wall ? "wall" : "CPU");
    std::printf("%-10s %13s %15s %8s %12s\n", "arch", "cached tok/s",
                "recompute tok/s", "ratio", "same tokens");
  }
  for (const std::string& arch : o.archs) {
    const Row& row = rows[arch];
    const double cached = Median(row.cached_tps),
                 recomputed = Median(row.recomputed_tps);
    out.push_back({{"arch", arch},
                   {"prompt_tokens", o.seq_len},
                   {"new_tokens", o.new_tokens},
                   {"cached_tokens_per_s", cached},
                   {"recomputed_tokens_per_s", recomputed},
                   {"speedup", cached / recomputed},
                   {"same_tokens", row.same}});
    if (!o.json) {
      std::printf("%-10s %13.1f %15.1f %8.1f %12s\n", arch.c_str(), cached,
                  recomputed, cached / recomputed, row.same ? "yes" : "no");
    }
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hlab::EnsurePassiveOpenMpWait(argv);
  hlab::train::KeepFreedMemoryForReuse();
  const Options o = ParseOptions(argc, argv);
  at::set_num_threads(static_cast<int>(
      o.threads > 0 ? o.threads
                    : std::max(1u, std::thread::hardware_concurrency())));
  hlab::data::SyntheticCorpus docs({.seed = 1,
                                    .split = hlab::data::Split::kHeldOut,
                                    .min_length = o.seq_len + 1,
                                    .max_length = 2 * o.seq_len});
  std::vector<std::vector<int32_t>> batch, profiled;
  for (int64_t d = 0; d < o.batch; ++d) {
    auto doc = *docs.GetDocument(d);
    doc.tokens.resize(static_cast<size_t>(o.seq_len + 1));
    batch.push_back(doc.tokens);
  }
  for (int64_t d = 0; d < o.documents; ++d) {
    auto doc = *docs.GetDocument(d);
    doc.tokens.resize(static_cast<size_t>(o.seq_len + 1));
    profiled.push_back(doc.tokens);
  }
  if (o.generate) {
    std::vector<int32_t> prompt = batch.front();
    prompt.resize(static_cast<size_t>(o.seq_len));
    return BenchGenerate(o, prompt);
  }
  const auto bytes = hlab::data::MakeByteTokenizer();
  hlab::eval::ProbingConfig probing;
  probing.context_length = o.seq_len;
  probing.samples = std::max<int64_t>(16, o.probe_samples);
  probing.corpus_seed = 1;
  hlab::eval::RetrievalHeadsConfig tracing;
  tracing.context_length = o.seq_len;
  tracing.corpus_seed = 1;
  const hlab::eval::KeyTokenConfig config = {
      .short_context = o.seq_len / 4,
      .window = std::max<int64_t>(1, o.seq_len / 16),
      .max_tokens = o.seq_len,
      .min_key_tokens = 0};

  std::map<std::string, std::unique_ptr<hlab::eval::ModelScorer>> scorers;
  std::map<std::string, hlab::model::HybridLM> models;
  for (const std::string& arch : o.archs) {
    torch::manual_seed(0);
    models.emplace(arch, hlab::model::HybridLM(ConfigFor(o, arch)));
    scorers[arch] = std::make_unique<hlab::eval::ModelScorer>(models.at(arch));
  }
  const int64_t limit = std::max<int64_t>(2, o.seq_len / 8 / 2 * 2);
  std::map<std::string, Figures> figures;
  for (int64_t rep = 0; rep <= o.repeats; ++rep) {  // round 0: warm-up
    for (const std::string& arch : o.archs) {
      auto& scorer = *scorers[arch];
      Figures& f = figures[arch];
      double start = Now();
      scorer.ScoreBatch(batch);
      f.score_tps.push_back(static_cast<double>(o.batch * o.seq_len) /
                            (Now() - start));
      // One scoring pass over the documents (what ScoreLongPpl costs).
      const auto score_pass = [&] {
        const double pass_start = Now();
        for (int64_t d = 0; d < o.documents; ++d) {
          auto doc = *docs.GetDocument(d);
          doc.tokens.resize(static_cast<size_t>(o.seq_len));
          scorer.Score(doc.tokens);
        }
        return Now() - pass_start;
      };
      f.score_s.push_back(score_pass());
      // The same pass under each receptive-field restriction.
      hlab::model::HybridLM& model = models.at(arch);
      for (int restriction = 0; restriction < 2; ++restriction) {
        if (restriction == 0) {
          model->set_full_attention_key_limit(limit + 1);
        } else {
          model->set_efficient_receptive_field(limit / 2, 3);
        }
        (restriction == 0 ? f.rf_full_s : f.rf_efficient_s)
            .push_back(score_pass());
        model->set_full_attention_key_limit(0);
        model->set_efficient_receptive_field(0);
      }
      start = Now();
      auto profile = hlab::eval::ProfileGradients(model, profiled);
      f.gradient_s.push_back(Now() - start);
      start = Now();
      auto probes = hlab::eval::ProbeNiahLayers(model, *bytes, probing);
      f.probe_s.push_back(Now() - start);
      start = Now();
      auto heads = hlab::eval::TraceRetrievalHeads(model, *bytes, tracing);
      f.heads_s.push_back(heads.ok() ? Now() - start : -1);
      if (!heads.ok() && !absl::IsFailedPrecondition(heads.status())) {
        std::cerr << "hlab-bench-eval: " << heads.status() << "\n";
        return 1;
      }
      if (!profile.ok() || !probes.ok()) {
        std::cerr << "hlab-bench-eval: "
                  << (profile.ok() ? probes.status() : profile.status())
                  << "\n";
        return 1;
      }
      start = Now();
      auto keys =
          hlab::eval::SelectKeyTokens(scorer, docs, config, o.documents);
      f.select_s.push_back(Now() - start);
      if (rep == 0) f = Figures();
      if (!keys.ok()) {
        std::cerr << "hlab-bench-eval: " << keys.status() << "\n";
        return 1;
      }
    }
  }
  Json out = Json::array();
  if (!o.json) {
    std::printf(
        "seq_len %lld, d_model %lld, %lld layers, batch %lld, %d threads; "
        "selection K=%lld W=%lld over %lld documents; probing %lld samples; "
        "median of %lld; %s time\n",
        static_cast<long long>(o.seq_len), static_cast<long long>(o.d_model),
        static_cast<long long>(o.layers), static_cast<long long>(o.batch),
        at::get_num_threads(), static_cast<long long>(config.short_context),
        static_cast<long long>(config.window),
        static_cast<long long>(o.documents),
        static_cast<long long>(probing.samples),
        static_cast<long long>(o.repeats), g_wall ? "wall" : "CPU");
    std::printf("%-10s %12s %9s %9s %9s %9s %9s %9s %9s %9s\n", "arch",
                "score tok/s", "score s", "select s", "sel / sc", "rf full",
                "rf eff", "grad / sc", "probe s", "heads s");
  }
  for (const std::string& arch : o.archs) {
    const Figures& f = figures[arch];
    const double tps = Median(f.score_tps), score = Median(f.score_s),
                 select = Median(f.select_s), rf_full = Median(f.rf_full_s),
                 rf_efficient = Median(f.rf_efficient_s),
                 gradient = Median(f.gradient_s), probe = Median(f.probe_s),
                 heads = Median(f.heads_s);
    out.push_back({{"arch", arch},
                   {"score_tokens_per_s", tps},
                   {"score_pass_s", score},
                   {"select_pass_s", select},
                   {"select_over_score", select / score},
                   {"receptive_field_limit", limit},
                   {"rf_full_over_score", rf_full / score},
                   {"rf_efficient_over_score", rf_efficient / score},
                   {"gradient_profile_over_score", gradient / score},
                   {"probing_s", probe},
                   {"probing_samples", probing.samples},
                   {"retrieval_heads_s", heads >= 0 ? Json(heads) : Json()},
                   {"retrieval_heads_samples", tracing.samples}});
    if (!o.json) {
      const std::string heads_text =
          heads >= 0 ? absl::StrFormat("%.3f", heads) : std::string("-");
      std::printf(
          "%-10s %12.0f %9.3f %9.3f %9.2f %9.2f %9.2f %9.2f %9.3f %9s\n",
          arch.c_str(), tps, score, select, select / score, rf_full / score,
          rf_efficient / score, gradient / score, probe, heads_text.c_str());
    }
  }
  if (o.json) std::cout << out.dump(2) << "\n";
  return 0;
}
