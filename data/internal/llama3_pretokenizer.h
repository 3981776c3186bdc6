// Llama 3's pre-tokenization, hand-written: splits text into the pieces that
// byte-level BPE then encodes one at a time. Llama 3 (like OpenAI's
// cl100k_base) splits with the regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (one line in the tokenizer.json, kLlama3SplitRegex), every match kept
// as a piece (Hugging Face's Split with behavior "Isolated"). This follows
// it exactly, as a backtracking engine reads it: the first alternative that
// matches wins. \s is Unicode White_Space and \p{L} / \p{N} come from the
// table of data/internal/unicode_classes.h (data/internal/char_classes.h);
// (?i) folds like Unicode simple case folding, so 'S and U+017F (long s)
// match as 's does. Invalid UTF-8 bytes, which the reference never sees,
// count as symbols ([^\s\p{L}\p{N}]).
//
// Thread-safety: a pure function.
//
//   Llama3PreTokenize("Hello world's 12345") ->
//       {"Hello", " world", "'s", " ", "123", "45"}
#ifndef HLAB_DATA_INTERNAL_LLAMA3_PRETOKENIZER_H_
#define HLAB_DATA_INTERNAL_LLAMA3_PRETOKENIZER_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace hlab::data::internal {

// The pattern, as tokenizer.json spells it (JSON-unescaped).
inline constexpr absl::string_view kLlama3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Appends the pieces of `text` to `pieces`, in order; they concatenate to
// `text`.
void Llama3PreTokenize(absl::string_view text,
                       std::vector<absl::string_view>* pieces);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_LLAMA3_PRETOKENIZER_H_
