#include "eval/eval_data.h"
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/filesystem.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "data/import.h"
#include "data/shard_corpus.h"
#include "data/tokenizer.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;

absl::Status Named(const std::string& field, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(field, ": ", status.message()));
}

// Identity of an input file for the import cache: path, size, mtime.
absl::StatusOr<std::string> InputIdentity(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (!fs::exists(absolute, ec)) {
    return absl::NotFoundError(
        absl::StrCat("'", path,
                     "' does not exist: give an existing JSONL "
                     "file (or directory)"));
  }
  std::string id = absolute.string();
  if (fs::is_regular_file(absolute, ec)) {
    absl::StrAppend(
        &id, "|", fs::file_size(absolute, ec), "|",
        fs::last_write_time(absolute, ec).time_since_epoch().count());
  }
  return id;
}

}  // namespace

EvalData::~EvalData() {
  if (!temp_dir_.empty()) {
    (void)RemoveTree(temp_dir_);  // common/filesystem.h says why not fs::
  }
}

absl::StatusOr<std::unique_ptr<EvalData>> EvalData::OpenJsonl(
    const std::string& path, const std::string& text_field,
    const std::string& tokenizer_spec, const std::string& tokenizer_dir,
    const std::string& cache_dir, const std::string& field) {
  auto input = InputIdentity(path);
  if (!input.ok()) return Named(field, input.status());
  auto tokenizer = data::MakeTokenizer(tokenizer_spec, tokenizer_dir);
  if (!tokenizer.ok()) return Named(field, tokenizer.status());
  const std::string hash =
      Sha256Hex(absl::StrCat(*input, "|", text_field, "|",
                             (*tokenizer)->vocabulary().tokenizer))
          .substr(0, 16);
  std::unique_ptr<EvalData> d(new EvalData());
  std::string dir;
  if (cache_dir.empty()) {
    dir = (fs::temp_directory_path() /
           absl::StrCat("hlab-eval-", ::getpid(), "-", hash))
              .string();
    d->temp_dir_ = dir;
  } else {
    dir = (fs::path(cache_dir) / "datasets" / hash).string();
  }
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "manifest.json", ec)) {
    data::PrepareOptions options;
    options.inputs = {path};
    options.output_dir = dir;
    options.tokenizer = (*tokenizer)->spec();
    options.text_field = text_field;
    options.held_out_fraction = 0;
    options.threads = 1;
    auto manifest = data::PrepareDataset(options);
    // Another evaluator may have imported it at the same time (its rename
    // won): use that copy.
    if (!manifest.ok() && !fs::exists(fs::path(dir) / "manifest.json", ec)) {
      return Named(field, manifest.status());
    }
  }
  auto corpus = data::ShardCorpus::Open(dir, data::kTrainSplit);
  if (!corpus.ok()) return Named(field, corpus.status());
  d->owned_ = *std::move(corpus);
  d->corpus_ = d->owned_.get();
  d->source_ = absl::StrCat("jsonl:", path);
  return d;
}

absl::StatusOr<std::unique_ptr<EvalData>> EvalData::OpenPrepared(
    const std::string& dir, const std::string& split,
    const std::string& field) {
  auto corpus = data::ShardCorpus::Open(dir, split);
  if (!corpus.ok()) return Named(field, corpus.status());
  std::unique_ptr<EvalData> d(new EvalData());
  d->owned_ = *std::move(corpus);
  d->corpus_ = d->owned_.get();
  d->source_ = absl::StrCat("prepared:", dir, " (", split, ")");
  return d;
}

std::unique_ptr<EvalData> EvalData::Borrow(const data::Corpus* corpus,
                                           std::string source) {
  std::unique_ptr<EvalData> d(new EvalData());
  d->corpus_ = corpus;
  d->source_ = std::move(source);
  return d;
}

absl::StatusOr<std::string> DocumentsIdentity(const data::Corpus& docs,
                                              int64_t n, int64_t max_tokens) {
  std::string bytes = docs.vocabulary().tokenizer;
  for (int64_t i = 0; i < n && i < docs.num_documents(); ++i) {
    HLAB_ASSIGN_OR_RETURN(data::Document doc, docs.GetDocument(i));
    const size_t len =
        std::min(doc.tokens.size(), static_cast<size_t>(max_tokens));
    absl::StrAppend(&bytes, "|", len, ":");
    bytes.append(reinterpret_cast<const char*>(doc.tokens.data()),
                 len * sizeof(int32_t));
  }
  return Sha256Hex(bytes);
}

}  // namespace hlab::eval
