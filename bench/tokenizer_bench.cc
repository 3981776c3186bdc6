// hlab-bench-tokenizer: encoding speed of hlab's tokenizers on real text,
// in MB/s of UTF-8 on one thread (no LibTorch).
//
//   build/bin/hlab-bench-tokenizer
//       --tokenizer hf:../shared/data/tokenizers/llama3
//       --tokenizer gpt2:../shared/data/tokenizers/gpt2
//       --input ../shared/data/govreport/gov_reports.jsonl --repeats 5
//
// Inputs are JSON lines with a "text" field, or any other file as one
// document. For each tokenizer: the load time, then a cold pass (a fresh
// instance, so its per-thread piece cache starts empty) and `repeats` warm
// passes over all documents, of which the median is printed. Times are
// this thread's CPU time, so a machine shared with other jobs does not skew
// them.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "data/tokenizer.h"

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

// The documents of `path`: one per JSON line's "text", or the whole file.
bool ReadDocuments(const std::string& path, std::vector<std::string>* docs) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  if (!absl::EndsWith(path, ".jsonl")) {
    std::stringstream all;
    all << in.rdbuf();
    docs->push_back(all.str());
    return true;
  }
  for (std::string line; std::getline(in, line);) {
    nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
    if (value.is_object() && value.contains("text") &&
        value["text"].is_string()) {
      docs->push_back(value["text"].get<std::string>());
    }
  }
  return true;
}

// CPU seconds to encode every document once; adds the token count.
double EncodeAll(const hlab::data::Tokenizer& tok,
                 const std::vector<std::string>& docs, int64_t* tokens) {
  double start = ThreadCpuSeconds();
  for (const std::string& doc : docs) {
    *tokens += static_cast<int64_t>(tok.Encode(doc).size());
  }
  return ThreadCpuSeconds() - start;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> specs;
  std::vector<std::string> inputs;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--tokenizer") {
      specs.push_back(argv[i + 1]);
    } else if (flag == "--input") {
      inputs.push_back(argv[i + 1]);
    } else if (flag == "--repeats" && absl::SimpleAtoi(argv[i + 1], &repeats) &&
               repeats > 0) {
    } else {
      std::fprintf(stderr,
                   "usage: hlab-bench-tokenizer --tokenizer SPEC... "
                   "--input PATH... [--repeats N]\n");
      return 2;
    }
  }
  if (specs.empty() || inputs.empty()) {
    std::fprintf(stderr,
                 "hlab-bench-tokenizer: give --tokenizer and --input\n");
    return 2;
  }
  std::vector<std::string> docs;
  for (const std::string& path : inputs) {
    if (!ReadDocuments(path, &docs)) {
      std::fprintf(stderr, "hlab-bench-tokenizer: cannot read %s\n",
                   path.c_str());
      return 2;
    }
  }
  double megabytes = 0;
  for (const std::string& doc : docs) megabytes += doc.size() / 1e6;
  std::printf("%zu documents, %.3f MB of text; CPU time of one thread\n",
              docs.size(), megabytes);
  std::printf("%-12s %8s %10s %9s %12s %12s\n", "tokenizer", "load s", "tokens",
              "bytes/tok", "cold MB/s", "warm MB/s");
  for (const std::string& spec : specs) {
    double start = ThreadCpuSeconds();
    auto tok = hlab::data::MakeTokenizer(spec);
    double load = ThreadCpuSeconds() - start;
    if (!tok.ok()) {
      std::fprintf(stderr, "hlab-bench-tokenizer: %s\n",
                   std::string(tok.status().message()).c_str());
      return 2;
    }
    int64_t tokens = 0;
    double cold = EncodeAll(**tok, docs, &tokens);
    std::vector<double> warm;
    for (int r = 0; r < repeats; ++r) {
      int64_t ignored = 0;
      warm.push_back(EncodeAll(**tok, docs, &ignored));
    }
    std::sort(warm.begin(), warm.end());
    std::printf("%-12s %8.3f %10lld %9.2f %12.1f %12.1f\n",
                spec.substr(0, spec.find(':')).c_str(), load,
                static_cast<long long>(tokens), megabytes * 1e6 / tokens,
                megabytes / cold, megabytes / warm[warm.size() / 2]);
  }
  return 0;
}
