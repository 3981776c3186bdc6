// GPT-2's pre-tokenization, hand-written: splits text into the pieces that
// byte-level BPE then encodes one at a time. GPT-2 uses the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Python `regex` module). This follows it exactly for ASCII. Beyond ASCII
// the Unicode classes are approximated by ranges: White_Space exactly;
// numbers are ASCII digits, superscripts and vulgar fractions in Latin-1,
// and the common decimal-digit blocks; punctuation and symbols are the
// Latin-1 and general-punctuation blocks, arrows/math/box drawing/dingbats
// (U+2190-U+2BFF), CJK symbols (U+3000-U+303F), full-width forms'
// punctuation and emoji (U+1F000-U+1FAFF); every other code point counts as
// a letter. Invalid UTF-8 bytes count as symbols.
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
