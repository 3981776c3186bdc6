// RULER's sources (eval/ruler/ruler_tasks.h): the essay text, SQuAD and
// HotpotQA files.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "eval/ruler/ruler_tasks.h"

namespace hlab::eval::ruler {
namespace {

using Json = nlohmann::json;

absl::StatusOr<Json> ReadJson(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open the ", what, " file"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  Json j = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON (a ", what, " file)"));
  }
  return j;
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// Adds `doc` to the dataset's documents once.
void AddDocument(QaDataset& qa, std::set<std::string>& seen,
                 const std::string& doc) {
  if (seen.insert(doc).second) qa.documents.push_back(doc);
}

}  // namespace

absl::StatusOr<QaDataset> LoadSquad(const std::string& path) {
  absl::StatusOr<Json> j = ReadJson(path, "SQuAD");
  if (!j.ok()) return j.status();
  if (!j->is_object() || !j->contains("data") || !(*j)["data"].is_array()) {
    return Bad(path, "a SQuAD file is an object with a \"data\" array");
  }
  QaDataset qa;
  std::set<std::string> seen;
  for (size_t a = 0; a < (*j)["data"].size(); ++a) {
    const Json& article = (*j)["data"][a];
    if (!article.is_object() || !article.contains("paragraphs") ||
        !article["paragraphs"].is_array()) {
      return Bad(path, absl::StrCat("data[", a, "] has no paragraphs array"));
    }
    for (size_t p = 0; p < article["paragraphs"].size(); ++p) {
      const Json& para = article["paragraphs"][p];
      const std::string at = absl::StrCat("data[", a, "].paragraphs[", p, "]");
      if (!para.is_object() || !para.contains("context") ||
          !para["context"].is_string() || !para.contains("qas") ||
          !para["qas"].is_array()) {
        return Bad(path, at + " needs a context string and a qas array");
      }
      const std::string context = para["context"].get<std::string>();
      AddDocument(qa, seen, context);
      for (size_t q = 0; q < para["qas"].size(); ++q) {
        const Json& item = para["qas"][q];
        if (!item.is_object() || !item.contains("question") ||
            !item["question"].is_string()) {
          return Bad(path, absl::StrCat(at, ".qas[", q, "] has no question"));
        }
        QaExample e;
        e.question = item["question"].get<std::string>();
        if (item.contains("answers") && item["answers"].is_array()) {
          for (const Json& ans : item["answers"]) {
            if (ans.is_object() && ans.contains("text") &&
                ans["text"].is_string()) {
              e.answers.push_back(ans["text"].get<std::string>());
            }
          }
        }
        if (e.answers.empty()) continue;  // SQuAD 2.0's unanswerable ones
        e.gold = {context};
        qa.examples.push_back(std::move(e));
      }
    }
  }
  return qa;
}

absl::StatusOr<QaDataset> LoadHotpotQa(const std::string& path) {
  absl::StatusOr<Json> j = ReadJson(path, "HotpotQA");
  if (!j.ok()) return j.status();
  if (!j->is_array()) {
    return Bad(path, "a HotpotQA file is a JSON array of questions");
  }
  QaDataset qa;
  std::set<std::string> seen;
  for (size_t i = 0; i < j->size(); ++i) {
    const Json& item = (*j)[i];
    const std::string at = absl::StrCat("[", i, "]");
    if (!item.is_object() || !item.contains("question") ||
        !item["question"].is_string() || !item.contains("answer") ||
        !item["answer"].is_string() || !item.contains("context") ||
        !item["context"].is_array()) {
      return Bad(path,
                 at + " needs question, answer (strings) and context (array)");
    }
    std::set<std::string> supporting;
    if (item.contains("supporting_facts") &&
        item["supporting_facts"].is_array()) {
      for (const Json& f : item["supporting_facts"]) {
        if (f.is_array() && !f.empty() && f[0].is_string()) {
          supporting.insert(f[0].get<std::string>());
        }
      }
    }
    QaExample e;
    e.question = item["question"].get<std::string>();
    e.answers = {item["answer"].get<std::string>()};
    for (size_t c = 0; c < item["context"].size(); ++c) {
      const Json& entry = item["context"][c];
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
          !entry[1].is_array()) {
        return Bad(path, absl::StrCat(at, ".context[", c,
                                      "] is not [title, [sentences]]"));
      }
      std::string doc = entry[0].get<std::string>() + "\n";
      for (const Json& s : entry[1]) {
        if (s.is_string()) doc += s.get<std::string>();
      }
      AddDocument(qa, seen, doc);
      if (supporting.count(entry[0].get<std::string>()) > 0) {
        e.gold.push_back(doc);
      }
    }
    if (e.gold.empty()) continue;  // no supporting paragraph given
    qa.examples.push_back(std::move(e));
  }
  return qa;
}

absl::StatusOr<RulerSources> LoadRulerSources(
    const std::string& essay_file, const std::string& squad_file,
    const std::string& hotpotqa_file) {
  RulerSources sources;
  if (!essay_file.empty()) {
    std::ifstream in(essay_file, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat(essay_file, ": cannot open the essay file"));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text = text.substr(3);  // BOM
    std::vector<std::string> words =
        absl::StrSplit(text, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty());
    if (words.size() < 100) {
      return Bad(essay_file, absl::StrCat("the essay has ", words.size(),
                                          " words; give a text of at least "
                                          "100 (RULER's essays have ~120K)"));
    }
    sources.essay = absl::StrJoin(words, " ");
  }
  if (!squad_file.empty()) {
    HLAB_ASSIGN_OR_RETURN(QaDataset qa, LoadSquad(squad_file));
    sources.squad = std::move(qa);
  }
  if (!hotpotqa_file.empty()) {
    HLAB_ASSIGN_OR_RETURN(QaDataset qa, LoadHotpotQa(hotpotqa_file));
    sources.hotpotqa = std::move(qa);
  }
  return sources;
}

}  // namespace hlab::eval::ruler
