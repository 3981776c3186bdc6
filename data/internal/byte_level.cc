#include "data/internal/byte_level.h"

#include <cstdint>

namespace hlab::data::internal {
namespace {

struct Alphabet {
  std::string characters[256];  // byte -> UTF-8
  int16_t byte_of[512];         // code point (< 512) -> byte, or -1

  Alphabet() {
    for (int16_t& b : byte_of) b = -1;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      uint32_t c = printable ? b : next++;
      byte_of[c] = static_cast<int16_t>(b);
      std::string& out = characters[b];
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else {  // c < 0x800: two bytes
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* alphabet = new Alphabet;
  return *alphabet;
}

}  // namespace

const std::string& ByteLevelCharacter(unsigned char byte) {
  return GetAlphabet().characters[byte];
}

bool ByteLevelDecode(absl::string_view token, std::string* bytes) {
  const Alphabet& alphabet = GetAlphabet();
  size_t start = bytes->size();
  for (size_t i = 0; i < token.size();) {
    unsigned char b0 = static_cast<unsigned char>(token[i]);
    uint32_t c = 0;
    if (b0 < 0x80) {
      c = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < token.size() &&
               (static_cast<unsigned char>(token[i + 1]) & 0xC0) == 0x80) {
      c = ((b0 & 0x1Fu) << 6) |
          (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      c = 512;  // not in the alphabet
    }
    if (c >= 512 || alphabet.byte_of[c] < 0) {
      bytes->resize(start);
      return false;
    }
    bytes->push_back(static_cast<char>(alphabet.byte_of[c]));
  }
  return true;
}

}  // namespace hlab::data::internal
