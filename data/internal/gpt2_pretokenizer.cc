#include "data/internal/gpt2_pretokenizer.h"

#include <cstdint>

#include "data/internal/unicode_classes.h"

namespace hlab::data::internal {
namespace {

enum class CharClass { kSpace, kLetter, kNumber, kOther };

struct CodePoint {
  uint32_t value;
  size_t length;  // bytes
};

// Decodes one UTF-8 code point at `text[pos]`; an invalid byte decodes to
// itself with length 1 and `*valid` false (it then counts as a symbol).
CodePoint DecodeAt(absl::string_view text, size_t pos, bool* valid) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b0 = byte(pos);
  *valid = true;
  if (b0 < 0x80) return {b0, 1};
  size_t length = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (length == 0 || b0 >= 0xF8 || pos + length > text.size()) {
    *valid = false;
    return {b0, 1};
  }
  uint32_t value = b0 & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) {
      *valid = false;
      return {b0, 1};
    }
    value = (value << 6) | (b & 0x3F);
  }
  return {value, length};
}

bool IsSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

CharClass Classify(absl::string_view text, size_t pos, size_t* length) {
  bool valid = true;
  CodePoint cp = DecodeAt(text, pos, &valid);
  *length = cp.length;
  if (!valid) return CharClass::kOther;
  if (IsSpace(cp.value)) return CharClass::kSpace;
  if (cp.value < 0x80) {
    uint32_t c = cp.value;
    if (c >= '0' && c <= '9') return CharClass::kNumber;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return CharClass::kLetter;
    }
    return CharClass::kOther;
  }
  if (IsUnicodeLetter(cp.value)) return CharClass::kLetter;
  if (IsUnicodeNumber(cp.value)) return CharClass::kNumber;
  return CharClass::kOther;
}

// End of the run of characters of class `cls` starting at `pos`.
size_t RunEnd(absl::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    size_t length = 0;
    if (Classify(text, pos, &length) != cls) break;
    pos += length;
  }
  return pos;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at `pos`, or 0.
size_t ContractionAt(absl::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  char c1 = text[pos + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  char c2 = text[pos + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') ||
      (c1 == 'l' && c2 == 'l')) {
    return 3;
  }
  return 0;
}

// Length of the match at `pos` (always >= 1).
size_t MatchAt(absl::string_view text, size_t pos) {
  if (size_t n = ContractionAt(text, pos); n > 0) return n;
  size_t length = 0;
  CharClass first = Classify(text, pos, &length);
  // ` ?X+` for letters, numbers, others: an optional ASCII space first.
  size_t start = pos;
  CharClass cls = first;
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    size_t next_length = 0;
    CharClass next = Classify(text, pos + 1, &next_length);
    if (next != CharClass::kSpace) {
      start = pos + 1;
      cls = next;
    }
  }
  if (cls != CharClass::kSpace) return RunEnd(text, start, cls) - pos;
  // `\s+(?!\S)|\s+`: a whitespace run, leaving its last character to the
  // next piece when a non-space follows and the run is longer than one.
  size_t end = RunEnd(text, pos, CharClass::kSpace);
  if (end == text.size()) return end - pos;
  size_t last = pos;  // start of the last whitespace character
  for (size_t p = pos; p < end;) {
    size_t n = 0;
    Classify(text, p, &n);
    last = p;
    p += n;
  }
  return last > pos ? last - pos : end - pos;
}

}  // namespace

std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length = MatchAt(text, pos);
    pieces.push_back(text.substr(pos, length));
    pos += length;
  }
  return pieces;
}

}  // namespace hlab::data::internal
