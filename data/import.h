// PrepareDataset: imports text (JSONL, plain or .gz; text files; directories
// of them) into a prepared dataset: tokenized binary shards, their indexes
// and a manifest with checksums (format in data/shard_format.h), read back by
// ShardCorpus (data/shard_corpus.h). The library form of `hlab-data
// prepare` (data/data_command.h).
//
// Held-out split: a document goes to the "heldout" split when a hash of its
// text and `split_seed` falls below `held_out_fraction`. The decision depends
// on the text alone, so duplicates land in the same split and a held-out
// document never appears in training. When the fraction is positive but no
// document falls below it (a small corpus), the document(s) with the lowest
// hash are held out instead, so the held-out split is never empty unless
// the fraction is 0 (or the corpus is one distinct document). The output is
// deterministic: the same inputs and options give byte-identical shards and
// manifest, whatever the thread count.
//
// Atomic: everything is written to a temporary sibling directory
// (OUTPUT.tmp-PID) that is renamed to OUTPUT at the end, so a crash never
// leaves a directory with a manifest that looks complete.
//
// Thread-safety: PrepareDataset may run concurrently for different outputs.
//
//   PrepareOptions options;
//   options.inputs = {"/data/c4/en"};
//   options.output_dir = "/data/prepared/c4-byte";
//   HLAB_ASSIGN_OR_RETURN(Manifest manifest, PrepareDataset(options));
#ifndef HLAB_DATA_IMPORT_H_
#define HLAB_DATA_IMPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/shard_format.h"

namespace hlab::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files and directories
  std::string output_dir;
  // Tokenizer spec (data/tokenizer.h). SentencePiece and GPT-2 files are
  // copied into the dataset, whose manifest then names the copies.
  std::string tokenizer = "byte";
  // When > 0: train a SentencePiece model of this many pieces on the train
  // split's text (first 200 MB) and use it; `tokenizer` is then ignored.
  int train_sentencepiece_vocab = 0;
  std::string sentencepiece_model_type = "bpe";  // or "unigram"
  // JSONL field holding the text; "a+b" joins fields, "x,a+b" takes the
  // first alternative a line has.
  std::string text_field = "text";
  double held_out_fraction = 0.01;  // in [0, 1)
  uint64_t split_seed = 0;
  int64_t shard_tokens = int64_t{1} << 24;  // target tokens per shard
  int threads = 0;                          // tokenizer threads; 0 = cores
  bool overwrite = false;                   // replace an existing output
  // Called with progress lines for stderr (one per input file, and one per
  // 32 MB batch within a large file); may be empty.
  std::function<void(const std::string&)> progress;
};

// Prepares the dataset and returns its manifest.
// Errors, each naming the file (and JSONL line) at fault:
//   InvalidArgument  bad options; a JSONL line that is not a JSON object or
//                    lacks the text field; no documents at all; every
//                    document held out
//   NotFound         an input or tokenizer file does not exist
//   AlreadyExists    OUTPUT exists and is not empty, without `overwrite`
//   DataLoss         a corrupt .gz input or tokenizer file
//   Internal         the output cannot be written
// On error nothing is left at OUTPUT (an existing one is untouched).
absl::StatusOr<Manifest> PrepareDataset(const PrepareOptions& options);

}  // namespace hlab::data

#endif  // HLAB_DATA_IMPORT_H_
