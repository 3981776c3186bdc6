#include "data/internal/char_classes.h"

#include "data/internal/unicode_classes.h"

namespace hlab::data::internal {
namespace {

struct CodePoint {
  uint32_t value;
  size_t length;  // bytes
};

// Decodes one UTF-8 code point at `text[pos]`; an invalid byte decodes to
// itself with length 1 and `*valid` false.
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

}  // namespace

CharClass ClassifyNonAscii(absl::string_view text, size_t pos, size_t* length) {
  bool valid = true;
  CodePoint cp = DecodeAt(text, pos, &valid);
  *length = cp.length;
  if (!valid) return CharClass::kOther;
  if (IsSpace(cp.value)) return CharClass::kSpace;
  if (IsUnicodeLetter(cp.value)) return CharClass::kLetter;
  if (IsUnicodeNumber(cp.value)) return CharClass::kNumber;
  return CharClass::kOther;
}

}  // namespace hlab::data::internal
