#include "data/import.h"
#include <unistd.h>

#include <algorithm>
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
#include "common/filesystem.h"
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

// A uniform [0, 1) score of `text` alone (FNV-1a 64, mixed with the seed):
// a document is held out when its score is below the held-out fraction, so
// duplicates share a split.
double HeldOutScore(const std::string& text, uint64_t seed) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  uint64_t mixed = SplitMix64(h ^ SplitMix64(seed));
  return static_cast<double>(mixed >> 11) * 0x1.0p-53;
}

bool IsHeldOut(const std::string& text, uint64_t seed, double fraction) {
  return fraction > 0 && HeldOutScore(text, seed) < fraction;
}

// The train documents with the lowest held-out score (exact duplicates
// share it), tracked so that a small corpus still gets a held-out split.
struct LowestScore {
  double score = 2;
  std::vector<int64_t> train_indices;

  void Offer(double s, int64_t train_index) {
    if (s < score) {
      score = s;
      train_indices.clear();
    }
    if (s == score) train_indices.push_back(train_index);
  }
};

// Moves the train documents `moved` (sorted indices) to the (empty) held-out
// split, rewriting the train shards in `dir`. Used only when no document
// scored below the held-out fraction, so the corpus is small.
absl::Status MoveToHeldOut(const std::string& dir,
                           const std::vector<int64_t>& moved, int token_bytes,
                           int64_t shard_tokens, Manifest* manifest) {
  const std::string rewrite_split = "train-rewrite";
  internal::ShardWriter train(dir, rewrite_split, token_bytes, shard_tokens);
  internal::ShardWriter heldout(dir, kHeldOutSplit, token_bytes, shard_tokens);
  int64_t index = 0;
  for (const ShardInfo& shard : manifest->train.shards) {
    HLAB_ASSIGN_OR_RETURN(
        std::string tokens,
        internal::ReadFileToString(dir + "/" + shard.tokens_file));
    HLAB_ASSIGN_OR_RETURN(
        std::string offsets,
        internal::ReadFileToString(dir + "/" + shard.index_file));
    auto read = [](const std::string& bytes, size_t at, int width) {
      uint64_t value = 0;
      for (int i = width - 1; i >= 0; --i) {
        value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
      }
      return value;
    };
    for (int64_t d = 0; d < shard.num_documents; ++d, ++index) {
      uint64_t begin = read(offsets, 8 * static_cast<size_t>(d), 8);
      uint64_t end = read(offsets, 8 * static_cast<size_t>(d + 1), 8);
      std::vector<int32_t> ids;
      for (uint64_t t = begin; t < end; ++t) {
        ids.push_back(static_cast<int32_t>(
            read(tokens, static_cast<size_t>(t) * token_bytes, token_bytes)));
      }
      bool move = std::binary_search(moved.begin(), moved.end(), index);
      HLAB_RETURN_IF_ERROR((move ? heldout : train).Add(ids));
    }
    std::error_code ec;
    fs::remove(dir + "/" + shard.tokens_file, ec);
    fs::remove(dir + "/" + shard.index_file, ec);
  }
  HLAB_RETURN_IF_ERROR(train.Finish(&manifest->train));
  HLAB_RETURN_IF_ERROR(heldout.Finish(&manifest->heldout));
  for (int i = 0; i < static_cast<int>(manifest->train.shards.size()); ++i) {
    ShardInfo& shard = manifest->train.shards[static_cast<size_t>(i)];
    for (auto [file, extension] :
         {std::pair<std::string*, const char*>{&shard.tokens_file, "tokens"},
          {&shard.index_file, "index"}}) {
      std::string name = ShardFileName(kTrainSplit, i, extension);
      std::error_code ec;
      fs::rename(dir + "/" + *file, dir + "/" + name, ec);
      if (ec) {
        return absl::InternalError(
            absl::StrCat("cannot rename ", *file, " in ", dir));
      }
      *file = name;
    }
  }
  return absl::OkStatus();
}

// Removes a directory tree when it goes out of scope, unless released.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    if (!path_.empty()) {
      (void)RemoveTree(path_);  // common/filesystem.h says why not fs::
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
  if (absl::ConsumePrefix(&spec, "hf:")) {
    std::error_code ec;
    fs::create_directory(dir + "/hf", ec);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      std::string from = absl::StrCat(spec, "/", name);
      if (!fs::exists(from, ec)) continue;  // the config is optional
      HLAB_RETURN_IF_ERROR(CopyFile(from, absl::StrCat(dir, "/hf/", name)));
    }
    return std::string("hf:hf");
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
  if (had_old) (void)RemoveTree(old);
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
  (void)RemoveTree(tmp.path());
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
  LowestScore lowest;
  int64_t train_documents = 0;
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
        double score = HeldOutScore(docs[i].text, options.split_seed);
        bool held_out = score < options.held_out_fraction;
        if (!held_out) lowest.Offer(score, train_documents++);
        HLAB_RETURN_IF_ERROR((held_out ? heldout : train).Add(ids));
        file_held_out += held_out ? 1 : 0;
        file_tokens += static_cast<int64_t>(ids.size());
        ++source.num_documents;
      }
      begin = end;
      if (options.progress && end < docs.size()) {
        options.progress(
            absl::StrFormat("prepare: [%d/%d] %s: %d of %d documents tokenized",
                            f + 1, files.size(), file.path, end, docs.size()));
      }
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
  if (options.held_out_fraction > 0 && manifest.heldout.num_documents == 0 &&
      static_cast<int64_t>(lowest.train_indices.size()) <
          manifest.train.num_documents) {
    if (options.progress) {
      options.progress(absl::StrCat(
          "prepare: no document scored below the held-out fraction; holding "
          "out the ",
          lowest.train_indices.size(), " with the lowest score"));
    }
    HLAB_RETURN_IF_ERROR(MoveToHeldOut(tmp.path(), lowest.train_indices,
                                       token_bytes, options.shard_tokens,
                                       &manifest));
  }
  HLAB_RETURN_IF_ERROR(internal::WriteStringToFile(
      tmp.path() + "/" + kManifestFileName, ManifestToJson(manifest)));
  HLAB_RETURN_IF_ERROR(Publish(tmp.path(), output.string()));
  tmp.Release();
  return manifest;
}

}  // namespace hlab::data
