#include "data/data_command.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/import.h"
#include "data/internal/jsonl_codec.h"
#include "data/shard_corpus.h"
#include "data/tokenizer.h"

namespace hlab::data {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

constexpr char kUsage[] = R"(usage: data SUBCOMMAND ...

  prepare   tokenize text (JSONL, plain or .gz; text files; directories)
            into checksummed shards with a held-out split
  verify    check every shard of a prepared dataset against its manifest
  inspect   summarize a prepared dataset; decode a few documents
  encode    JSON lines {"text": ...} on stdin -> {"ids": [...]} on stdout
  decode    JSON lines {"ids": [...]} on stdin -> {"text": ...} on stdout

Run `data SUBCOMMAND --help` for its flags. See docs/data.md.
)";

constexpr char kPrepareUsage[] =
    R"(usage: data prepare --input PATH [--input PATH...] --output DIR [flags]

  --input PATH              a JSONL file (*.jsonl, *.json, *.ndjson), a text
                            file (any other name; the file is one document),
                            either optionally .gz, or a directory (searched
                            recursively, sorted, hidden entries skipped).
                            Repeatable; bare arguments count as inputs too.
  --output DIR              the dataset directory to create (written to
                            DIR.tmp-PID, renamed when complete)
  --tokenizer SPEC          byte (default), sentencepiece:PATH.model,
                            gpt2:DIR (encoder.json + vocab.bpe) or hf:DIR
                            (a Hugging Face byte-level BPE tokenizer.json:
                            Llama 3's, GPT-2's)
  --train-sentencepiece N   train a SentencePiece model with N pieces on the
                            train split instead (N >= 300); stored in DIR
  --sentencepiece-type T    bpe (default) or unigram, with the flag above
  --text-field F            the JSONL field holding the text (default text);
                            a+b concatenates fields a and b; x,a+b takes
                            the first alternative a line has
  --held-out X              fraction of documents, chosen by a hash of their
                            text, kept out of training (default 0.01)
  --split-seed N            seed of that hash (default 0)
  --shard-tokens N          target tokens per shard (default 16777216)
  --threads N               tokenizer threads (default: all cores)
  --overwrite               replace DIR if it exists
  --quiet                   no progress lines on stderr
)";

constexpr char kVerifyUsage[] = R"(usage: data verify DIR

Checks the size and SHA-256 of every shard and index of both splits against
DIR/manifest.json. Exit 0 when all match, 2 naming the first bad file.
)";

constexpr char kInspectUsage[] = R"(usage: data inspect DIR [flags]

  --split S        train (default) or heldout
  --decode N       print the first N documents of the split, decoded
  --max-chars N    characters printed per decoded document (default 400)
)";

constexpr char kEncodeUsage[] = R"(usage: data encode [--tokenizer SPEC]

Reads JSON lines {"text": ...} on stdin and writes one line {"ids": [...]}
per input line on stdout: the tokenizer's Encode(), with no BOS or EOS
added. A line that is not a JSON object with a string "text" ends the run
with exit 2 naming its line number (the lines before it are written).

  --tokenizer SPEC   byte (default), sentencepiece:PATH.model, gpt2:DIR or
                     hf:DIR (see `data prepare --help`, docs/data.md)
)";

constexpr char kDecodeUsage[] = R"(usage: data decode [--tokenizer SPEC]

Reads JSON lines {"ids": [...]} on stdin and writes one line {"text": ...}
per input line on stdout (end_of_document as a newline, pad as nothing;
bytes that are not valid UTF-8 as U+FFFD). A line without a list "ids" of
integers in the vocabulary ends the run with exit 2 naming its line number
and the id.

  --tokenizer SPEC   as for `data encode`
)";

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kPermissionDenied:
      return kExitFailure;
    default:
      return kExitBadInput;
  }
}

// Parsed `--name value` / `--name=value` flags and positional arguments.
struct Flags {
  std::multimap<std::string, std::string> values;
  std::vector<std::string> positional;
  bool help = false;

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, std::string fallback) const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
};

// `boolean` flags take no value. InvalidArgument for unknown flags.
absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args,
                                 const std::vector<std::string>& valued,
                                 const std::vector<std::string>& boolean) {
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  Flags flags;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      flags.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (contains(boolean, name) && !has_value) {
      flags.values.emplace(name, "true");
    } else if (contains(valued, name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", name, " needs a value"));
        }
        value = args[++i];
      }
      flags.values.emplace(name, value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return flags;
}

template <typename T>
absl::Status ParseNumber(const Flags& flags, const std::string& name,
                         T* value) {
  if (!flags.Has(name)) return absl::OkStatus();
  std::string text = flags.Get(name, "");
  bool ok = false;
  if constexpr (std::is_floating_point_v<T>) {
    ok = absl::SimpleAtod(text, value);
  } else {
    ok = absl::SimpleAtoi(text, value);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " needs a number, not '", text, "'"));
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& status, std::ostream& err) {
  err << "error: " << status.message() << "\n";
  return ExitCodeFor(status);
}

int Prepare(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  absl::StatusOr<Flags> flags =
      ParseFlags(args,
                 {"input", "output", "tokenizer", "train-sentencepiece",
                  "sentencepiece-type", "text-field", "held-out", "split-seed",
                  "shard-tokens", "threads"},
                 {"overwrite", "quiet"});
  if (!flags.ok()) {
    err << "error: " << flags.status().message() << "\n" << kPrepareUsage;
    return kExitBadInput;
  }
  if (flags->help) {
    out << kPrepareUsage;
    return kExitOk;
  }
  PrepareOptions options;
  for (auto [it, end] = flags->values.equal_range("input"); it != end; ++it) {
    options.inputs.push_back(it->second);
  }
  for (const std::string& input : flags->positional) {
    options.inputs.push_back(input);
  }
  options.output_dir = flags->Get("output", "");
  options.tokenizer = flags->Get("tokenizer", options.tokenizer);
  options.sentencepiece_model_type =
      flags->Get("sentencepiece-type", options.sentencepiece_model_type);
  options.text_field = flags->Get("text-field", options.text_field);
  options.overwrite = flags->Has("overwrite");
  for (absl::Status status :
       {ParseNumber(*flags, "train-sentencepiece",
                    &options.train_sentencepiece_vocab),
        ParseNumber(*flags, "held-out", &options.held_out_fraction),
        ParseNumber(*flags, "split-seed", &options.split_seed),
        ParseNumber(*flags, "shard-tokens", &options.shard_tokens),
        ParseNumber(*flags, "threads", &options.threads)}) {
    if (!status.ok()) return Fail(status, err);
  }
  if (flags->Has("tokenizer") && flags->Has("train-sentencepiece")) {
    err << "error: give either --tokenizer or --train-sentencepiece\n";
    return kExitBadInput;
  }
  if (options.inputs.empty() || options.output_dir.empty()) {
    err << "error: prepare needs --input and --output\n" << kPrepareUsage;
    return kExitBadInput;
  }
  if (!flags->Has("quiet")) {
    options.progress = [&err](const std::string& line) {
      err << line << std::endl;
    };
  }
  absl::StatusOr<Manifest> manifest = PrepareDataset(options);
  if (!manifest.ok()) return Fail(manifest.status(), err);
  out << absl::StrFormat(
      "prepared %s: %d train documents (%d tokens, %d shards), %d held out "
      "(%d tokens); tokenizer %s, %d ids\n",
      options.output_dir, manifest->train.num_documents,
      manifest->train.num_tokens, manifest->train.shards.size(),
      manifest->heldout.num_documents, manifest->heldout.num_tokens,
      manifest->vocabulary.tokenizer, manifest->vocabulary.size);
  return kExitOk;
}

int Verify(const std::vector<std::string>& args, std::ostream& out,
           std::ostream& err) {
  absl::StatusOr<Flags> flags = ParseFlags(args, {}, {});
  if (!flags.ok() || (!flags->help && flags->positional.size() != 1)) {
    err << kVerifyUsage;
    return kExitBadInput;
  }
  if (flags->help) {
    out << kVerifyUsage;
    return kExitOk;
  }
  const std::string& dir = flags->positional[0];
  absl::Status status = VerifyDataset(dir);
  if (!status.ok()) return Fail(status, err);
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return Fail(manifest.status(), err);
  out << absl::StrFormat(
      "ok: %s: %d shards checked\n", dir,
      manifest->train.shards.size() + manifest->heldout.shards.size());
  return kExitOk;
}

// Prints the split's document-length distribution (for the long/short
// mixture's threshold).
void PrintLengths(const ShardCorpus& corpus, std::ostream& out) {
  std::vector<int64_t> lengths(static_cast<size_t>(corpus.num_documents()));
  for (int64_t i = 0; i < corpus.num_documents(); ++i) {
    lengths[static_cast<size_t>(i)] = corpus.DocumentLength(i);
  }
  if (lengths.empty()) return;
  std::sort(lengths.begin(), lengths.end());
  auto at = [&](double q) {
    return lengths[static_cast<size_t>(q * (lengths.size() - 1))];
  };
  out << absl::StrFormat("document tokens: min %d, median %d, p90 %d, max %d\n",
                         at(0), at(0.5), at(0.9), at(1));
  for (int64_t threshold : {1024, 4096, 16384, 65536}) {
    int64_t count = lengths.end() -
                    std::lower_bound(lengths.begin(), lengths.end(), threshold);
    out << absl::StrFormat("  >= %d tokens: %d documents\n", threshold, count);
  }
}

int Inspect(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  absl::StatusOr<Flags> flags =
      ParseFlags(args, {"split", "decode", "max-chars"}, {});
  if (!flags.ok() || (!flags->help && flags->positional.size() != 1)) {
    if (!flags.ok()) err << "error: " << flags.status().message() << "\n";
    err << kInspectUsage;
    return kExitBadInput;
  }
  if (flags->help) {
    out << kInspectUsage;
    return kExitOk;
  }
  int64_t decode = 0;
  int64_t max_chars = 400;
  for (absl::Status status : {ParseNumber(*flags, "decode", &decode),
                              ParseNumber(*flags, "max-chars", &max_chars)}) {
    if (!status.ok()) return Fail(status, err);
  }
  const std::string& dir = flags->positional[0];
  absl::StatusOr<std::unique_ptr<ShardCorpus>> corpus =
      ShardCorpus::Open(dir, flags->Get("split", kTrainSplit));
  if (!corpus.ok()) return Fail(corpus.status(), err);
  const Manifest& m = (*corpus)->manifest();
  out << absl::StrFormat(
      "dataset %s (format %d)\n"
      "tokenizer: %s (spec %s), %d ids, end_of_document %d, pad %d, %s\n",
      dir, m.format_version, m.vocabulary.tokenizer, m.tokenizer_spec,
      m.vocabulary.size, m.vocabulary.end_of_document, m.vocabulary.pad,
      m.token_type);
  for (const char* name : {kTrainSplit, kHeldOutSplit}) {
    const SplitInfo& split = m.split(name);
    out << absl::StrFormat("%s: %d documents, %d tokens, %d shards\n", name,
                           split.num_documents, split.num_tokens,
                           split.shards.size());
  }
  out << absl::StrFormat("held-out fraction %g, split seed %d; %d sources:\n",
                         m.held_out_fraction, m.split_seed, m.sources.size());
  for (const SourceInfo& source : m.sources) {
    out << absl::StrFormat("  %s (%s, %d bytes): %d documents\n", source.path,
                           source.format, source.bytes, source.num_documents);
  }
  out << (*corpus)->split() << " ";
  PrintLengths(**corpus, out);
  if (decode > 0) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
        MakeTokenizer(m.tokenizer_spec, dir);
    if (!tok.ok()) return Fail(tok.status(), err);
    for (int64_t i = 0; i < std::min(decode, (*corpus)->num_documents()); ++i) {
      absl::StatusOr<Document> doc = (*corpus)->GetDocument(i);
      if (!doc.ok()) return Fail(doc.status(), err);
      std::string text = (*tok)->Decode(doc->tokens);
      if (static_cast<int64_t>(text.size()) > max_chars) {
        text = text.substr(0, static_cast<size_t>(max_chars)) + "...";
      }
      out << absl::StrFormat("--- document %d (%d tokens)\n%s\n", i,
                             doc->tokens.size(), text);
    }
  }
  return kExitOk;
}

// `data encode` and `data decode`: JSON lines through a tokenizer.
int Codec(const std::vector<std::string>& args, std::istream& in,
          std::ostream& out, std::ostream& err) {
  const bool encode = args[0] == "encode";
  const char* usage = encode ? kEncodeUsage : kDecodeUsage;
  absl::StatusOr<Flags> flags = ParseFlags(args, {"tokenizer"}, {});
  if (!flags.ok() || (!flags->help && !flags->positional.empty())) {
    if (!flags.ok()) err << "error: " << flags.status().message() << "\n";
    err << usage;
    return kExitBadInput;
  }
  if (flags->help) {
    out << usage;
    return kExitOk;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      MakeTokenizer(flags->Get("tokenizer", "byte"));
  if (!tok.ok()) return Fail(tok.status(), err);
  absl::Status status = encode ? internal::EncodeJsonLines(**tok, in, out)
                               : internal::DecodeJsonLines(**tok, in, out);
  if (!status.ok()) return Fail(status, err);
  return kExitOk;
}

}  // namespace

int RunDataCommand(const std::vector<std::string>& args, std::ostream& out,
                   std::ostream& err) {
  return RunDataCommand(args, std::cin, out, err);
}

int RunDataCommand(const std::vector<std::string>& args, std::istream& in,
                   std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" ||
      args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kExitBadInput : kExitOk;
  }
  if (args[0] == "prepare") return Prepare(args, out, err);
  if (args[0] == "verify") return Verify(args, out, err);
  if (args[0] == "inspect") return Inspect(args, out, err);
  if (args[0] == "encode" || args[0] == "decode") {
    return Codec(args, in, out, err);
  }
  err << "error: unknown data subcommand '" << args[0] << "'\n" << kUsage;
  return kExitBadInput;
}

int RunDataCommand(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return RunDataCommand(args, std::cout, std::cerr);
}

}  // namespace hlab::data
