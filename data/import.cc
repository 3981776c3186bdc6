#include "data/import.h"
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "data/internal/document_reader.h"
#include "data/internal/files.h"
#include "data/internal/shard_writer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"

namespace hlab::data {
namespace {

namespace fs = std::filesystem;
using internal::InputFile;
using internal::RawDocument;

constexpr int64_t kSentencePieceTextLimit = int64_t{200} << 20;
constexpr int64_t kBatchTextBytes = int64_t{32} << 20;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// True when `text` belongs to the held-out split: a hash of the text alone
// (FNV-1a 64, mixed with the seed), so duplicates share a split.
bool IsHeldOut(const std::string& text, uint64_t seed, double fraction) {
  if (fraction <= 0) return false;
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  uint64_t mixed = SplitMix64(h ^ SplitMix64(seed));
  double u = static_cast<double>(mixed >> 11) * 0x1.0p-53;
  return u < fraction;
}

// Removes a directory tree when it goes out of scope, unless released.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const std::string& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

absl::Status CopyFile(const std::string& from, const std::string& to) {
  HLAB_ASSIGN_OR_RETURN(std::string bytes, internal::ReadFileToString(from));
  return internal::WriteStringToFile(to, bytes);
}

absl::Status ValidateOptions(const PrepareOptions& options) {
  if (options.inputs.empty()) {
    return absl::InvalidArgumentError("no inputs given");
  }
  if (options.output_dir.empty()) {
    return absl::InvalidArgumentError("no output directory given");
  }
  if (!(options.held_out_fraction >= 0 && options.held_out_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("held-out fraction must be in [0, 1), not ",
                     options.held_out_fraction));
  }
  if (options.shard_tokens <= 0) {
    return absl::InvalidArgumentError("shard tokens must be positive");
  }
  if (options.text_field.empty()) {
    return absl::InvalidArgumentError("text field must not be empty");
  }
  return absl::OkStatus();
}

// Trains a SentencePiece model on the train split's text into
// `dir`/tokenizer.model.
absl::Status TrainTokenizer(const PrepareOptions& options,
                            const std::vector<InputFile>& files,
                            const std::string& dir) {
  std::vector<std::string> texts;
  int64_t total = 0;
  for (const InputFile& file : files) {
    if (total >= kSentencePieceTextLimit) break;
    std::vector<RawDocument> docs;
    int64_t skipped = 0;
    HLAB_RETURN_IF_ERROR(
        internal::ReadDocuments(file, options.text_field, &docs, &skipped));
    for (RawDocument& doc : docs) {
      if (total >= kSentencePieceTextLimit) break;
      if (IsHeldOut(doc.text, options.split_seed, options.held_out_fraction)) {
        continue;
      }
      total += static_cast<int64_t>(doc.text.size());
      texts.push_back(std::move(doc.text));
    }
  }
  if (options.progress) {
    options.progress(absl::StrCat("prepare: training a SentencePiece ",
                                  options.sentencepiece_model_type, " model (",
                                  options.train_sentencepiece_vocab,
                                  " pieces) on ", total, " bytes of text"));
  }
  SentencePieceTrainOptions train_options;
  train_options.vocab_size = options.train_sentencepiece_vocab;
  train_options.model_type = options.sentencepiece_model_type;
  return TrainSentencePiece(texts, train_options, dir + "/tokenizer.model");
}

// Sets up the dataset's own copy of the tokenizer in `dir` and returns the
// spec that names it relative to the dataset.
absl::StatusOr<std::string> InstallTokenizer(
    const PrepareOptions& options, const std::vector<InputFile>& files,
    const std::string& dir) {
  if (options.train_sentencepiece_vocab > 0) {
    HLAB_RETURN_IF_ERROR(TrainTokenizer(options, files, dir));
    return std::string("sentencepiece:tokenizer.model");
  }
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                        MakeTokenizer(options.tokenizer));
  absl::string_view spec = options.tokenizer;
  if (absl::ConsumePrefix(&spec, "sentencepiece:")) {
    HLAB_RETURN_IF_ERROR(CopyFile(std::string(spec), dir + "/tokenizer.model"));
    return std::string("sentencepiece:tokenizer.model");
  }
  if (absl::ConsumePrefix(&spec, "gpt2:")) {
    std::error_code ec;
    fs::create_directory(dir + "/gpt2", ec);
    for (const char* name : {"encoder.json", "vocab.bpe"}) {
      HLAB_RETURN_IF_ERROR(CopyFile(absl::StrCat(spec, "/", name),
                                    absl::StrCat(dir, "/gpt2/", name)));
    }
    return std::string("gpt2:gpt2");
  }
  return tok->spec();
}

// Tokenizes `docs[begin, end)` on `threads` threads; result i belongs to
// docs[begin + i], whatever the thread count.
std::vector<std::vector<int32_t>> TokenizeBatch(
    const Tokenizer& tok, const std::vector<RawDocument>& docs, size_t begin,
    size_t end, int threads) {
  std::vector<std::vector<int32_t>> out(end - begin);
  std::atomic<size_t> next{begin};
  auto work = [&] {
    for (size_t i = next++; i < end; i = next++) {
      out[i - begin] = tok.Encode(docs[i].text);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  return out;
}

absl::Status CheckOutput(const PrepareOptions& options) {
  std::error_code ec;
  fs::path output(options.output_dir);
  if (!fs::exists(output, ec) || options.overwrite) return absl::OkStatus();
  if (fs::is_directory(output, ec) && fs::is_empty(output, ec)) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "output ", options.output_dir,
      " already exists; choose another directory or pass --overwrite"));
}

// Moves the finished `tmp` to the output path, replacing what is there.
absl::Status Publish(const std::string& tmp, const std::string& output) {
  std::error_code ec;
  std::string old = absl::StrCat(output, ".old-", ::getpid());
  bool had_old = fs::exists(output, ec);
  if (had_old) {
    fs::rename(output, old, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot move aside ", output, ": ", ec.message()));
    }
  }
  fs::rename(tmp, output, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ",
                                            output, ": ", ec.message()));
  }
  if (had_old) fs::remove_all(old, ec);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Manifest> PrepareDataset(const PrepareOptions& options) {
  HLAB_RETURN_IF_ERROR(ValidateOptions(options));
  HLAB_RETURN_IF_ERROR(CheckOutput(options));
  HLAB_ASSIGN_OR_RETURN(std::vector<InputFile> files,
                        internal::ListInputFiles(options.inputs));

  std::error_code ec;
  fs::path output = fs::path(options.output_dir).lexically_normal();
  if (output.has_filename() == false) output = output.parent_path();
  if (output.has_parent_path())
    fs::create_directories(output.parent_path(), ec);
  TempDir tmp(absl::StrCat(output.string(), ".tmp-", ::getpid()));
  fs::remove_all(tmp.path(), ec);
  if (!fs::create_directory(tmp.path(), ec)) {
    return absl::InternalError(
        absl::StrCat("cannot create ", tmp.path(), ": ", ec.message()));
  }

  Manifest manifest;
  HLAB_ASSIGN_OR_RETURN(manifest.tokenizer_spec,
                        InstallTokenizer(options, files, tmp.path()));
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                        MakeTokenizer(manifest.tokenizer_spec, tmp.path()));
  manifest.vocabulary = tok->vocabulary();
  manifest.token_type = TokenTypeFor(manifest.vocabulary.size);
  manifest.text_field = options.text_field;
  manifest.held_out_fraction = options.held_out_fraction;
  manifest.split_seed = options.split_seed;
  manifest.shard_tokens = options.shard_tokens;

  int token_bytes = TokenBytes(manifest.token_type);
  internal::ShardWriter train(tmp.path(), kTrainSplit, token_bytes,
                              options.shard_tokens);
  internal::ShardWriter heldout(tmp.path(), kHeldOutSplit, token_bytes,
                                options.shard_tokens);
  int threads = options.threads > 0
                    ? options.threads
                    : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  int64_t total_documents = 0;
  int64_t total_tokens = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const InputFile& file = files[f];
    SourceInfo source;
    source.path = file.path;
    source.format = file.format;
    source.bytes = file.bytes;
    std::vector<RawDocument> docs;
    HLAB_RETURN_IF_ERROR(internal::ReadDocuments(file, options.text_field,
                                                 &docs, &source.skipped_empty));
    int64_t file_tokens = 0;
    int64_t file_held_out = 0;
    for (size_t begin = 0; begin < docs.size();) {
      size_t end = begin;
      int64_t bytes = 0;
      while (end < docs.size() && (end == begin || bytes < kBatchTextBytes)) {
        bytes += static_cast<int64_t>(docs[end++].text.size());
      }
      std::vector<std::vector<int32_t>> tokens =
          TokenizeBatch(*tok, docs, begin, end, threads);
      for (size_t i = begin; i < end; ++i) {
        std::vector<int32_t>& ids = tokens[i - begin];
        if (ids.empty()) {
          ++source.skipped_empty;
          continue;
        }
        bool held_out = IsHeldOut(docs[i].text, options.split_seed,
                                  options.held_out_fraction);
        HLAB_RETURN_IF_ERROR((held_out ? heldout : train).Add(ids));
        file_held_out += held_out ? 1 : 0;
        file_tokens += static_cast<int64_t>(ids.size());
        ++source.num_documents;
      }
      begin = end;
    }
    total_documents += source.num_documents;
    total_tokens += file_tokens;
    if (options.progress) {
      options.progress(absl::StrFormat(
          "prepare: [%d/%d] %s: %d documents (%d held out), %d tokens; "
          "total %d documents, %d tokens",
          f + 1, files.size(), file.path, source.num_documents, file_held_out,
          file_tokens, total_documents, total_tokens));
    }
    manifest.sources.push_back(std::move(source));
  }
  HLAB_RETURN_IF_ERROR(train.Finish(&manifest.train));
  HLAB_RETURN_IF_ERROR(heldout.Finish(&manifest.heldout));
  if (total_documents == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty corpus: no non-empty documents in ", files.size(),
                     " input file(s), e.g. ", files[0].path));
  }
  if (manifest.train.num_documents == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all ", total_documents,
        " documents went to the held-out split; lower --held-out"));
  }
  HLAB_RETURN_IF_ERROR(internal::WriteStringToFile(
      tmp.path() + "/" + kManifestFileName, ManifestToJson(manifest)));
  HLAB_RETURN_IF_ERROR(Publish(tmp.path(), output.string()));
  tmp.Release();
  return manifest;
}

}  // namespace hlab::data
