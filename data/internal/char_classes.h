// The character classes that the pre-tokenizers' regexes are written in:
// \s (Unicode White_Space), \p{L}, \p{N} and everything else, read from
// UTF-8 one code point at a time. An invalid UTF-8 byte, which the regexes'
// reference implementations never see (they decode text first), is one
// character of class kOther, so every byte string splits into characters.
//
// Thread-safety: pure functions over constant tables.
//
//   size_t length = 0;
//   ClassifyAt("\xC3\xA9t\xC3\xA9", 0, &length);  // kLetter, length 2
#ifndef HLAB_DATA_INTERNAL_CHAR_CLASSES_H_
#define HLAB_DATA_INTERNAL_CHAR_CLASSES_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace hlab::data::internal {

enum class CharClass : uint8_t { kSpace, kLetter, kNumber, kOther };

// The class of an ASCII character.
constexpr CharClass AsciiClass(int c) {
  if ((c >= 0x09 && c <= 0x0D) || c == ' ') return CharClass::kSpace;
  if (c >= '0' && c <= '9') return CharClass::kNumber;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
    return CharClass::kLetter;
  }
  return CharClass::kOther;
}

// AsciiClass() of every ASCII character, looked up on the fast path.
struct AsciiClassTable {
  CharClass classes[128];
  constexpr AsciiClassTable() : classes() {
    for (int c = 0; c < 128; ++c) classes[c] = AsciiClass(c);
  }
};
inline constexpr AsciiClassTable kAsciiClasses;

// The class of a code point beyond ASCII.
CharClass ClassifyNonAscii(absl::string_view text, size_t pos, size_t* length);

// The class of the character at `text[pos]` (pos < text.size()); sets
// `*length` to its length in bytes (1 for an invalid byte).
inline CharClass ClassifyAt(absl::string_view text, size_t pos,
                            size_t* length) {
  unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    *length = 1;
    return kAsciiClasses.classes[b];
  }
  return ClassifyNonAscii(text, pos, length);
}

// End of the run of characters of class `cls` that starts at `pos`.
inline size_t RunEnd(absl::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    size_t length = 0;
    if (ClassifyAt(text, pos, &length) != cls) break;
    pos += length;
  }
  return pos;
}

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_CHAR_CLASSES_H_
