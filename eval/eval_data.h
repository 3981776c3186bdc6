// EvalData: the documents an evaluation reads, from one of three sources
// (docs/evaluation.md, "Data"):
//   * the run's own held-out data, from the task's "config" (synthetic: the
//     held-out split of the built-in corpus, whose recall positions are
//     known; prepared: the dataset's held-out shards), through
//     train::TrainingData as hlab-train validates;
//   * a JSONL file (or directory) such as C4 or GovReport, imported with
//     data::PrepareDataset (all documents kept, none held out) into
//     <cache_dir>/datasets/<hash> and reused while the file is unchanged
//     (into a temporary directory removed afterwards without a cache_dir);
//   * a prepared dataset (`hlab-data prepare`), one split.
// Texts are tokenized with the evaluated model's tokenizer: imported JSONL
// with that tokenizer's spec, and a prepared dataset must carry the same
// tokenizer identity (data::Vocabulary::tokenizer).
//
// DocumentsIdentity is the identity of the documents an evaluation used:
// a SHA-256 over their (truncated) tokens, for the key-token cache.
//
// Thread-safety: an EvalData is immutable once opened.
//
//   HLAB_ASSIGN_OR_RETURN(auto docs, EvalData::OpenJsonl(
//       "/data/govreport.jsonl", "text", "byte", "", cache_dir, "data"));
//   HLAB_ASSIGN_OR_RETURN(std::string id,
//                         DocumentsIdentity(docs->corpus(), 10, 4096));
#ifndef HLAB_EVAL_EVAL_DATA_H_
#define HLAB_EVAL_EVAL_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/corpus.h"

namespace hlab::eval {

class EvalData {
 public:
  ~EvalData();
  EvalData(const EvalData&) = delete;
  EvalData& operator=(const EvalData&) = delete;

  // Imports `path` (JSONL, optionally .gz; field `text_field`, "a+b" joins
  // fields) with `tokenizer_spec` (data/tokenizer.h; relative paths in it
  // are relative to `tokenizer_dir`). Errors name `field` and the file:
  // NotFound, InvalidArgument (bad line or field), DataLoss.
  static absl::StatusOr<std::unique_ptr<EvalData>> OpenJsonl(
      const std::string& path, const std::string& text_field,
      const std::string& tokenizer_spec, const std::string& tokenizer_dir,
      const std::string& cache_dir, const std::string& field);
  // Opens split `split` of the prepared dataset in `dir`.
  static absl::StatusOr<std::unique_ptr<EvalData>> OpenPrepared(
      const std::string& dir, const std::string& split,
      const std::string& field);
  // Wraps a corpus owned elsewhere (the run's held-out data).
  static std::unique_ptr<EvalData> Borrow(const data::Corpus* corpus,
                                          std::string source);

  const data::Corpus& corpus() const { return *corpus_; }
  // "jsonl:/path", "prepared:/dir (heldout)", "synthetic held-out ...".
  const std::string& source() const { return source_; }

 private:
  EvalData() = default;
  std::unique_ptr<data::Corpus> owned_;
  const data::Corpus* corpus_ = nullptr;
  std::string source_;
  std::string temp_dir_;  // removed by the destructor
};

// SHA-256 over the tokens of documents [0, n) of `docs`, each cut to
// `max_tokens`, with their lengths: equal identities mean equal documents.
absl::StatusOr<std::string> DocumentsIdentity(const data::Corpus& docs,
                                              int64_t n, int64_t max_tokens);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_EVAL_DATA_H_
