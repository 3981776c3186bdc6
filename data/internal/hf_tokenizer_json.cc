#include "data/internal/hf_tokenizer_json.h"

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/internal/llama3_pretokenizer.h"
#include "nlohmann/json.hpp"

namespace hlab::data::internal {
namespace {

using json = nlohmann::json;

// Ids at or above this are refused: hlab keeps a table indexed by id, and a
// corrupt file must not make it allocate gigabytes (Llama 3 has 128256).
constexpr int64_t kMaxId = int64_t{1} << 24;

// GPT-2's split regex, as a tokenizer.json spells it.
constexpr absl::string_view kGpt2SplitRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

// Takes model.vocab and model.merges out of the parse as it goes, so that
// nlohmann's DOM never holds them (a std::map of 128K tokens and 280K
// strings for Llama 3, most of the load time). The parser calls it for
// every event with the nesting depth: model.vocab's entries are keys and
// values at depth 3 (refused from the DOM by returning false), merges are
// values or two-element arrays at depth 3.
class ModelStream {
 public:
  using Event = json::parse_event_t;

  bool operator()(int depth, Event event, json& parsed) {
    if (event == Event::object_start || event == Event::array_start) {
      if (depth < kLevels) opened_[depth] = event;
      if (depth < kLevels) keys_[depth + 1].clear();
      return true;
    }
    if (event == Event::key && depth < kLevels) {
      keys_[depth] = parsed.get<std::string>();
      if (depth == 3 && In("vocab", Event::object_start)) {
        ++vocab_keys;
        return false;  // the value still comes, as Event::value
      }
      return true;
    }
    if (depth != 3) return true;
    if (In("vocab", Event::object_start)) {
      if (event == Event::value && parsed.is_number_integer() &&
          parsed.get<int64_t>() >= 0 && parsed.get<int64_t>() < kMaxId) {
        vocab.emplace_back(keys_[3], parsed.get<int32_t>());
      } else if (error.empty()) {
        error = absl::StrCat(
            "model.vocab: bad id (not 0 <= id < 2^24) for "
            "token ",
            json(keys_[3]).dump());
      }
      return false;
    }
    if (In("merges", Event::array_start) &&
        (event == Event::value || event == Event::array_end ||
         event == Event::object_end)) {
      AddMerge(parsed);
      return false;
    }
    return true;
  }

  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string error;  // the first bad entry, or empty
  // Keys of model.vocab seen: an entry whose value is a list or an object
  // never reaches Event::value (its key was dropped), so this counts them.
  size_t vocab_keys = 0;

 private:
  static constexpr int kLevels = 4;

  // Whether the current depth-3 element is in model.`field`, a container
  // opened by `opening`.
  bool In(const char* field, Event opening) const {
    return opened_[0] == Event::object_start && keys_[1] == "model" &&
           opened_[1] == Event::object_start && keys_[2] == field &&
           opened_[2] == opening;
  }

  void AddMerge(const json& merge) {
    size_t index = merges.size();
    if (merge.is_string()) {
      const std::string& pair = merge.get_ref<const std::string&>();
      size_t space = pair.find(' ');
      if (space != std::string::npos && space > 0 &&
          pair.find(' ', space + 1) == std::string::npos) {
        merges.emplace_back(pair.substr(0, space), pair.substr(space + 1));
        return;
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      merges.emplace_back(merge[0].get<std::string>(),
                          merge[1].get<std::string>());
      return;
    }
    if (error.empty()) {
      error = absl::StrCat("model.merges[", index, "] ", merge.dump(),
                           " is not two tokens");
    }
    merges.emplace_back();  // keeps the indices of later entries
  }

  Event opened_[kLevels] = {};
  std::string keys_[kLevels + 1];
};

// Reads one tokenizer.json, naming `path_` in every error.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  absl::StatusOr<HfTokenizerJson> Read(absl::string_view text) {
    json root;
    try {
      // Exceptions on: nlohmann throws on 1e999 even when told not to.
      root = json::parse(text.begin(), text.end(), std::ref(stream_));
    } catch (const json::exception&) {
      root = nullptr;
    }
    if (!root.is_object()) {
      return absl::DataLossError(absl::StrCat(
          "not a Hugging Face tokenizer.json (JSON object): ", path_));
    }
    static const std::set<std::string> kKnown = {
        "version",      "truncation",     "padding",
        "added_tokens", "normalizer",     "pre_tokenizer",
        "model",        "post_processor", "decoder"};
    for (const auto& item : root.items()) {
      if (kKnown.count(item.key()) == 0) {
        return Unsupported(absl::StrCat("the key \"", item.key(), "\""), "");
      }
    }
    for (const char* key : {"truncation", "padding"}) {
      if (root.contains(key) && !root[key].is_null()) {
        return Unsupported(key, "hlab encodes whole documents");
      }
    }
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      return Unsupported(Typed("normalizer", root["normalizer"]),
                         "hlab reads tokenizers without a normalizer");
    }
    HfTokenizerJson def;
    HLAB_RETURN_IF_ERROR(ReadModel(Field(root, "model"), &def));
    HLAB_RETURN_IF_ERROR(ReadPreTokenizer(Field(root, "pre_tokenizer"), &def));
    HLAB_RETURN_IF_ERROR(ReadAddedTokens(Field(root, "added_tokens"), &def));
    HLAB_RETURN_IF_ERROR(ReadPostProcessor(Field(root, "post_processor"),
                                           "post_processor", &def));
    HLAB_RETURN_IF_ERROR(ReadDecoder(Field(root, "decoder")));
    return def;
  }

 private:
  static const json& Field(const json& object, const char* key) {
    static const json kNull;
    auto it = object.find(key);
    return it == object.end() ? kNull : *it;
  }

  // `name.type "T"`, or `name null` when absent.
  static std::string Typed(absl::string_view name, const json& value) {
    const json& type = value.is_object() ? Field(value, "type") : value;
    if (type.is_string()) {
      return absl::StrCat(name, ".type \"", type.get<std::string>(), "\"");
    }
    return absl::StrCat(name, " ", value.is_null() ? "null" : value.dump());
  }

  absl::Status Unsupported(absl::string_view what, absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat(path_, ": ", what, " is not supported",
                     why.empty() ? "" : absl::StrCat(" (", why, ")")));
  }

  absl::Status Malformed(absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path_, ": ", what));
  }

  // `object[key]` as a bool, `fallback` when absent or null.
  absl::StatusOr<bool> Bool(const json& object, const char* key, bool fallback,
                            absl::string_view where) {
    const json& value = Field(object, key);
    if (value.is_null()) return fallback;
    if (!value.is_boolean()) {
      return Malformed(absl::StrCat(where, ".", key, " must be true or false"));
    }
    return value.get<bool>();
  }

  absl::Status ReadModel(const json& model, HfTokenizerJson* def) {
    if (!model.is_object() || Field(model, "type") != "BPE") {
      return Unsupported(Typed("model", model), "hlab reads byte-level BPE");
    }
    const json& dropout = Field(model, "dropout");
    if (!dropout.is_null() && !(dropout.is_number() && dropout == 0)) {
      return Unsupported("model.dropout", "hlab encodes deterministically");
    }
    HLAB_ASSIGN_OR_RETURN(bool byte_fallback,
                          Bool(model, "byte_fallback", false, "model"));
    if (byte_fallback) {
      return Unsupported("model.byte_fallback",
                         "hlab reads byte-level BPE, which needs no fallback");
    }
    for (const char* key :
         {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json& value = Field(model, key);
      if (!value.is_null() && value != "") {
        return Unsupported(absl::StrCat("model.", key, " ", value.dump()),
                           "hlab reads byte-level BPE");
      }
    }
    HLAB_ASSIGN_OR_RETURN(def->ignore_merges,
                          Bool(model, "ignore_merges", false, "model"));
    // The entries were taken out during the parse (ModelStream); the
    // emptied containers remain.
    if (!Field(model, "vocab").is_object()) {
      return Malformed("model.vocab must be an object");
    }
    if (!Field(model, "merges").is_array()) {
      return Malformed("model.merges must be a list");
    }
    if (!stream_.error.empty()) return Malformed(stream_.error);
    if (stream_.vocab_keys != stream_.vocab.size()) {
      return Malformed("model.vocab: an entry's id is not a number");
    }
    def->vocab = std::move(stream_.vocab);
    def->merges = std::move(stream_.merges);
    return absl::OkStatus();
  }

  absl::Status ReadByteLevel(const json& step, absl::string_view where,
                             HfTokenizerJson* def) {
    HLAB_ASSIGN_OR_RETURN(bool prefix_space,
                          Bool(step, "add_prefix_space", true, where));
    if (prefix_space) {
      return Unsupported(absl::StrCat(where, ".add_prefix_space true"),
                         "decoding would not give back the text");
    }
    HLAB_ASSIGN_OR_RETURN(bool use_regex, Bool(step, "use_regex", true, where));
    if (use_regex) def->splits.push_back(HfSplit::kGpt2);
    return absl::OkStatus();
  }

  absl::Status ReadSplit(const json& step, absl::string_view where,
                         HfTokenizerJson* def) {
    const json& regex = Field(Field(step, "pattern"), "Regex");
    if (!regex.is_string()) {
      return Unsupported(
          absl::StrCat(where, ".pattern ", Field(step, "pattern").dump()),
          "hlab implements the Regex patterns of Llama 3 and GPT-2");
    }
    const std::string& pattern = regex.get_ref<const std::string&>();
    if (pattern == kLlama3SplitRegex) {
      def->splits.push_back(HfSplit::kLlama3);
    } else if (pattern == kGpt2SplitRegex) {
      def->splits.push_back(HfSplit::kGpt2);
    } else {
      return Unsupported(absl::StrCat(where, ".pattern ", regex.dump()),
                         "hlab implements the Regex patterns of Llama 3 and "
                         "GPT-2 by hand");
    }
    if (Field(step, "behavior") != "Isolated") {
      return Unsupported(
          absl::StrCat(where, ".behavior ", Field(step, "behavior").dump()),
          "hlab reads Isolated");
    }
    HLAB_ASSIGN_OR_RETURN(bool invert, Bool(step, "invert", false, where));
    if (invert) return Unsupported(absl::StrCat(where, ".invert true"), "");
    return absl::OkStatus();
  }

  absl::Status ReadPreTokenizer(const json& pre, HfTokenizerJson* def) {
    const char* kWhy =
        "hlab reads ByteLevel, or Split steps followed by ByteLevel";
    std::vector<const json*> steps;
    bool sequence = pre.is_object() && Field(pre, "type") == "Sequence";
    if (sequence) {
      const json& list = Field(pre, "pretokenizers");
      if (!list.is_array()) {
        return Malformed("pre_tokenizer.pretokenizers must be a list");
      }
      for (const json& step : list) steps.push_back(&step);
    } else {
      steps.push_back(&pre);
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const json& step = *steps[i];
      std::string where =
          sequence ? absl::StrCat("pre_tokenizer.pretokenizers[", i, "]")
                   : std::string("pre_tokenizer");
      bool last = i + 1 == steps.size();
      if (step.is_object() && Field(step, "type") == "Split" && !last) {
        HLAB_RETURN_IF_ERROR(ReadSplit(step, where, def));
      } else if (step.is_object() && Field(step, "type") == "ByteLevel" &&
                 last) {
        HLAB_RETURN_IF_ERROR(ReadByteLevel(step, where, def));
      } else {
        return Unsupported(Typed(where, step), kWhy);
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAddedTokens(const json& tokens, HfTokenizerJson* def) {
    if (tokens.is_null()) return absl::OkStatus();
    if (!tokens.is_array()) return Malformed("added_tokens must be a list");
    for (size_t i = 0; i < tokens.size(); ++i) {
      const json& token = tokens[i];
      std::string where = absl::StrCat("added_tokens[", i, "]");
      const json& content = Field(token, "content");
      const json& id = Field(token, "id");
      if (!content.is_string() || content == "" || !id.is_number_integer() ||
          id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId) {
        return Malformed(
            absl::StrCat(where, " needs a content and an id below 2^24"));
      }
      for (const char* key : {"single_word", "lstrip", "rstrip"}) {
        HLAB_ASSIGN_OR_RETURN(bool set, Bool(token, key, false, where));
        if (set) {
          return Unsupported(
              absl::StrCat(where, ".", key, " true (", content.dump(), ")"),
              "hlab matches added tokens exactly");
        }
      }
      HfAddedToken added;
      added.content = content.get<std::string>();
      added.id = id.get<int32_t>();
      HLAB_ASSIGN_OR_RETURN(added.special,
                            Bool(token, "special", false, where));
      HLAB_ASSIGN_OR_RETURN(added.normalized,
                            Bool(token, "normalized", !added.special, where));
      def->added_tokens.push_back(std::move(added));
    }
    return absl::OkStatus();
  }

  absl::Status ReadTemplate(const json& processor, absl::string_view where,
                            HfTokenizerJson* def) {
    const json& single = Field(processor, "single");
    const json& specials = Field(processor, "special_tokens");
    if (!single.is_array()) {
      return Malformed(absl::StrCat(where, ".single must be a list"));
    }
    bool seen_text = false;
    for (const json& piece : single) {
      if (piece.contains("Sequence") && Field(piece["Sequence"], "id") == "A" &&
          !seen_text) {
        seen_text = true;
        continue;
      }
      const json& name = Field(Field(piece, "SpecialToken"), "id");
      const json& ids =
          name.is_string()
              ? Field(Field(specials, name.get<std::string>().c_str()), "ids")
              : name;
      if (!ids.is_array()) {
        return Unsupported(absl::StrCat(where, ".single item ", piece.dump()),
                           "hlab reads special tokens around one sequence");
      }
      for (const json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= kMaxId) {
          return Malformed(absl::StrCat(where, ".special_tokens: bad ids"));
        }
        (seen_text ? def->template_suffix : def->template_prefix)
            .push_back(id.get<int32_t>());
      }
    }
    if (!seen_text) {
      return Malformed(absl::StrCat(where, ".single has no Sequence A"));
    }
    return absl::OkStatus();
  }

  absl::Status ReadPostProcessor(const json& processor, absl::string_view where,
                                 HfTokenizerJson* def) {
    if (processor.is_null()) return absl::OkStatus();
    const json& type = Field(processor, "type");
    // ByteLevel post-processing only trims offsets: the ids stay as they are.
    if (type == "ByteLevel") return absl::OkStatus();
    if (type == "TemplateProcessing") {
      return ReadTemplate(processor, where, def);
    }
    if (type == "Sequence" && Field(processor, "processors").is_array()) {
      const json& list = processor["processors"];
      for (size_t i = 0; i < list.size(); ++i) {
        HLAB_RETURN_IF_ERROR(ReadPostProcessor(
            list[i], absl::StrCat(where, ".processors[", i, "]"), def));
      }
      return absl::OkStatus();
    }
    return Unsupported(Typed(where, processor),
                       "hlab reads ByteLevel and TemplateProcessing");
  }

  absl::Status ReadDecoder(const json& decoder) {
    if (decoder.is_object() && Field(decoder, "type") == "ByteLevel") {
      return absl::OkStatus();
    }
    return Unsupported(Typed("decoder", decoder), "hlab reads ByteLevel");
  }

  std::string path_;
  ModelStream stream_;
};

}  // namespace

absl::StatusOr<HfTokenizerJson> ParseHfTokenizerJson(
    absl::string_view json_text, const std::string& path) {
  return Reader(path).Read(json_text);
}

}  // namespace hlab::data::internal
