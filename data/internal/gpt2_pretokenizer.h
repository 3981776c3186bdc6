// GPT-2's pre-tokenization, hand-written: splits text into the pieces that
// byte-level BPE then encodes one at a time. GPT-2 uses the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Python `regex` module). This follows it exactly: \s is Unicode
// White_Space, and \p{L} / \p{N} come from a range table generated from the
// `regex` module (data/internal/unicode_classes.h). Invalid UTF-8 bytes,
// which the reference cannot see (it decodes text first), count as symbols.
//
// Thread-safety: a pure function.
//
//   Gpt2PreTokenize("Hello world's") -> {"Hello", " world", "'s"}
#ifndef HLAB_DATA_INTERNAL_GPT2_PRETOKENIZER_H_
#define HLAB_DATA_INTERNAL_GPT2_PRETOKENIZER_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace hlab::data::internal {

// The pieces of `text`, in order; they concatenate to `text`.
std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_GPT2_PRETOKENIZER_H_
