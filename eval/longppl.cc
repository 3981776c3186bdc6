#include "eval/longppl.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;

// Short-context chunks scored per forward pass during key-token selection.
constexpr size_t kChunkBatch = 16;
// Documents scored per forward pass by ScoreLongPpl.
constexpr size_t kDocumentBatch = 8;

absl::StatusOr<std::vector<int32_t>> Truncated(const data::Corpus& docs,
                                               int64_t index,
                                               int64_t max_tokens) {
  HLAB_ASSIGN_OR_RETURN(data::Document doc, docs.GetDocument(index));
  if (static_cast<int64_t>(doc.tokens.size()) > max_tokens) {
    doc.tokens.resize(static_cast<size_t>(max_tokens));
  }
  return doc.tokens;
}

}  // namespace

absl::Status ValidateKeyTokenConfig(const KeyTokenConfig& c) {
  if (c.short_context < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("short_context: must be >= 1, got ", c.short_context));
  }
  if (c.window < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("window: must be >= 1, got ", c.window));
  }
  if (c.max_tokens <= c.short_context + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens: must exceed short_context + 1 (",
                     c.short_context + 1, "), got ", c.max_tokens));
  }
  if (c.min_key_tokens < 0) {
    return absl::InvalidArgumentError("min_key_tokens: must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyTokens> SelectKeyTokens(TokenScorer& reference,
                                          const data::Corpus& docs,
                                          const KeyTokenConfig& config,
                                          int64_t num_documents) {
  HLAB_RETURN_IF_ERROR(ValidateKeyTokenConfig(config));
  KeyTokens keys;
  keys.config = config;
  const int64_t k = config.short_context, w = config.window;
  int64_t longest = 0;
  num_documents = std::min(num_documents, docs.num_documents());
  for (int64_t d = 0; d < num_documents; ++d) {
    HLAB_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                          Truncated(docs, d, config.max_tokens));
    const int64_t n = static_cast<int64_t>(tokens.size());
    longest = std::max(longest, n);
    if (n <= k + 1) continue;
    const std::vector<float> full = reference.Score(tokens);  // full[i-1]: i
    DocumentKeyTokens out;
    out.document = d;
    out.length = n;
    // The chunks [start, start + K + W), scored kChunkBatch per forward
    // pass (all but the last have the same length).
    std::vector<int64_t> starts;
    for (int64_t start = 0; start < n - k; start += w) starts.push_back(start);
    for (size_t first = 0; first < starts.size(); first += kChunkBatch) {
      const size_t last = std::min(starts.size(), first + kChunkBatch);
      std::vector<std::vector<int32_t>> chunks;
      for (size_t c = first; c < last; ++c) {
        const int64_t end = std::min(n, starts[c] + k + w);
        chunks.emplace_back(tokens.begin() + starts[c], tokens.begin() + end);
      }
      const std::vector<std::vector<float>> short_nll =
          reference.ScoreBatch(chunks);
      for (size_t c = first; c < last; ++c) {
        const int64_t start = starts[c];
        const int64_t end = std::min(n, start + k + w);
        const std::vector<float>& nll = short_nll[c - first];
        for (int64_t p = start + k; p < end; ++p) {
          const double loss_short = nll[static_cast<size_t>(p - start - 1)];
          const double loss_full = full[static_cast<size_t>(p - 1)];
          if (loss_short - loss_full > config.alpha &&
              -loss_full > config.beta) {
            out.positions.push_back(p);
          }
        }
      }
    }
    keys.candidate_tokens += n - k;
    keys.documents.push_back(std::move(out));
  }
  if (keys.documents.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no document is longer than short_context + 1 = ", k + 1,
                     " tokens (the longest has ", longest,
                     "): use longer documents or a smaller short_context"));
  }
  return keys;
}

absl::StatusOr<LongPplResult> ScoreLongPpl(TokenScorer& model,
                                           const data::Corpus& docs,
                                           const KeyTokens& keys) {
  LongPplResult r;
  double sum = 0;
  // Each scored document's mean key-token NLL, and its key tokens.
  std::vector<std::pair<double, int64_t>> per_document;
  // Documents are scored kDocumentBatch per forward pass.
  std::vector<const DocumentKeyTokens*> pending;
  std::vector<std::vector<int32_t>> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    const std::vector<std::vector<float>> nll = model.ScoreBatch(batch);
    for (size_t b = 0; b < batch.size(); ++b) {
      double document_sum = 0;
      for (int64_t p : pending[b]->positions) {
        document_sum += nll[b][static_cast<size_t>(p - 1)];
      }
      sum += document_sum;
      const int64_t n = static_cast<int64_t>(pending[b]->positions.size());
      per_document.emplace_back(document_sum / static_cast<double>(n), n);
    }
    pending.clear();
    batch.clear();
  };
  for (const DocumentKeyTokens& doc : keys.documents) {
    if (static_cast<int64_t>(doc.positions.size()) <
        keys.config.min_key_tokens) {
      ++r.documents_skipped;
      continue;
    }
    HLAB_ASSIGN_OR_RETURN(
        std::vector<int32_t> tokens,
        Truncated(docs, doc.document, keys.config.max_tokens));
    if (static_cast<int64_t>(tokens.size()) != doc.length) {
      return absl::FailedPreconditionError(absl::StrCat(
          "document ", doc.document, " has ", tokens.size(),
          " tokens but its key tokens were selected on ", doc.length,
          ": the dataset changed; select the key tokens again"));
    }
    if (doc.positions.empty()) {  // min_key_tokens 0: nothing to score
      ++r.documents;
      continue;
    }
    pending.push_back(&doc);
    batch.push_back(std::move(tokens));
    if (batch.size() >= kDocumentBatch) flush();
    r.key_tokens += static_cast<int64_t>(doc.positions.size());
    ++r.documents;
  }
  flush();
  if (r.documents == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no document has at least ", keys.config.min_key_tokens,
        " key tokens (", r.documents_skipped,
        " skipped): use more or longer documents, or a reference model "
        "trained on longer context"));
  }
  if (r.key_tokens == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the reference selected no key tokens in the ", r.documents,
        " documents (min_key_tokens is 0): use longer documents, or a "
        "reference trained longer"));
  }
  r.log_longppl = sum / static_cast<double>(r.key_tokens);
  // log(sum_d n_d exp(m_d) / sum_d n_d), shifted by the largest m_d.
  double largest = per_document.front().first;
  for (const auto& [mean, n] : per_document) largest = std::max(largest, mean);
  double weighted = 0;
  for (const auto& [mean, n] : per_document) {
    weighted += static_cast<double>(n) * std::exp(mean - largest);
  }
  r.log_longppl_per_document =
      largest + std::log(weighted / static_cast<double>(r.key_tokens));
  return r;
}

absl::StatusOr<KeyTokenAccuracy> CompareWithRecallPositions(
    const data::Corpus& docs, const KeyTokens& keys) {
  KeyTokenAccuracy a;
  for (const DocumentKeyTokens& doc : keys.documents) {
    HLAB_ASSIGN_OR_RETURN(data::Document d, docs.GetDocument(doc.document));
    std::set<int64_t> truth;
    for (int64_t p : d.recall_positions) {
      if (p >= keys.config.short_context && p < doc.length) truth.insert(p);
    }
    a.true_positions += static_cast<int64_t>(truth.size());
    a.selected += static_cast<int64_t>(doc.positions.size());
    for (int64_t p : doc.positions) a.hits += truth.count(p);
  }
  a.precision = a.selected > 0 ? static_cast<double>(a.hits) / a.selected : 0;
  a.recall =
      a.true_positions > 0 ? static_cast<double>(a.hits) / a.true_positions : 0;
  a.chance = keys.candidate_tokens > 0
                 ? static_cast<double>(a.true_positions) / keys.candidate_tokens
                 : 0;
  return a;
}

std::string KeyTokensToJson(const KeyTokens& keys) {
  const KeyTokenConfig& c = keys.config;
  Json docs = Json::array();
  for (const DocumentKeyTokens& d : keys.documents) {
    docs.push_back({{"document", d.document},
                    {"length", d.length},
                    {"positions", d.positions}});
  }
  return Json{{"config",
               {{"short_context", c.short_context},
                {"window", c.window},
                {"alpha", c.alpha},
                {"beta", c.beta},
                {"max_tokens", c.max_tokens},
                {"min_key_tokens", c.min_key_tokens}}},
              {"candidate_tokens", keys.candidate_tokens},
              {"documents", docs}}
      .dump();
}

absl::StatusOr<KeyTokens> KeyTokensFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::DataLossError("key-token cache entry is not valid JSON");
  }
  KeyTokens keys;
  try {
    const Json& c = j.at("config");
    keys.config = {.short_context = c.at("short_context").get<int64_t>(),
                   .window = c.at("window").get<int64_t>(),
                   .alpha = c.at("alpha").get<double>(),
                   .beta = c.at("beta").get<double>(),
                   .max_tokens = c.at("max_tokens").get<int64_t>(),
                   .min_key_tokens = c.at("min_key_tokens").get<int64_t>()};
    keys.candidate_tokens = j.at("candidate_tokens").get<int64_t>();
    for (const Json& d : j.at("documents")) {
      keys.documents.push_back(
          {.document = d.at("document").get<int64_t>(),
           .length = d.at("length").get<int64_t>(),
           .positions = d.at("positions").get<std::vector<int64_t>>()});
    }
  } catch (const Json::exception& e) {
    return absl::DataLossError(
        absl::StrCat("key-token cache entry is malformed: ", e.what()));
  }
  return keys;
}

}  // namespace hlab::eval
