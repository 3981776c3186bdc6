#include "eval/cross_tokenizer_keys.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/key_spans.h"
#include "eval/internal/token_corpus.h"

namespace hlab::eval {
namespace {

// One document of the model's tokens as text, with each token's bytes.
struct ModelText {
  std::string text;
  std::vector<data::ByteSpan> spans;
  int64_t length = 0;
};

absl::StatusOr<ModelText> TextOf(const data::Tokenizer& tokenizer,
                                 std::vector<int32_t> tokens, int64_t index) {
  ModelText out;
  out.length = static_cast<int64_t>(tokens.size());
  for (int32_t id : tokens) {
    const std::string piece = tokenizer.Decode({id});
    const auto begin = static_cast<int64_t>(out.text.size());
    out.spans.push_back({begin, begin + static_cast<int64_t>(piece.size())});
    out.text += piece;
  }
  if (out.text != tokenizer.Decode(tokens)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "evals.longppl.reference: the evaluated model's tokenizer ",
        tokenizer.spec(), " does not decode document ", index,
        " token by token to its text, so key tokens cannot travel to it as "
        "character ranges; use a reference with the model's own tokenizer"));
  }
  return out;
}

}  // namespace

absl::StatusOr<KeyTokens> SelectKeyTokensAcrossTokenizers(
    TokenScorer& reference, const data::Tokenizer& reference_tokenizer,
    const data::Tokenizer& model_tokenizer, const data::Corpus& docs,
    const KeyTokenConfig& config, int64_t num_documents) {
  const int64_t n = std::min(num_documents, docs.num_documents());
  internal::TokenCorpus reference_docs(reference_tokenizer.vocabulary());
  std::vector<ModelText> texts;
  std::vector<std::vector<data::ByteSpan>> reference_spans;
  int64_t longest = 0;
  for (int64_t d = 0; d < n; ++d) {
    HLAB_ASSIGN_OR_RETURN(data::Document doc, docs.GetDocument(d));
    if (static_cast<int64_t>(doc.tokens.size()) > config.max_tokens) {
      doc.tokens.resize(static_cast<size_t>(config.max_tokens));
    }
    HLAB_ASSIGN_OR_RETURN(ModelText text,
                          TextOf(model_tokenizer, std::move(doc.tokens), d));
    data::EncodedText encoded =
        reference_tokenizer.EncodeWithOffsets(text.text);
    longest = std::max<int64_t>(longest, encoded.ids.size());
    reference_docs.Add(std::move(encoded.ids));
    reference_spans.push_back(std::move(encoded.spans));
    texts.push_back(std::move(text));
  }
  // K, W, alpha and beta count the reference's tokens; its documents are
  // the whole model documents' text, however many tokens that is.
  KeyTokenConfig reference_config = config;
  reference_config.max_tokens = std::max<int64_t>(longest, 1);
  HLAB_ASSIGN_OR_RETURN(
      KeyTokens chosen,
      SelectKeyTokens(reference, reference_docs, reference_config, n));
  KeyTokens out;
  out.config = config;
  for (const DocumentKeyTokens& r : chosen.documents) {
    const size_t d = static_cast<size_t>(r.document);
    const ModelText& text = texts[d];
    data::KeySpanDocument keys;
    keys.id = absl::StrCat("document ", r.document);
    keys.where = keys.id;
    keys.text = text.text;
    keys.key_ranges = data::KeyRangesOfTokens(reference_spans[d], r.positions);
    HLAB_ASSIGN_OR_RETURN(std::vector<int64_t> model_keys,
                          data::KeyTokenIndices(keys, text.text, text.spans));
    DocumentKeyTokens m;
    m.document = r.document;
    m.length = text.length;
    for (int64_t i : model_keys) {
      if (i > 0) m.positions.push_back(i);
    }
    // The model's candidates: its tokens after the reference's first K.
    const int64_t k = config.short_context;
    const int64_t after = k < static_cast<int64_t>(reference_spans[d].size())
                              ? reference_spans[d][static_cast<size_t>(k)].begin
                              : std::numeric_limits<int64_t>::max();
    for (size_t i = 1; i < text.spans.size(); ++i) {
      if (text.spans[i].begin >= after) ++out.candidate_tokens;
    }
    out.documents.push_back(std::move(m));
  }
  return out;
}

}  // namespace hlab::eval
