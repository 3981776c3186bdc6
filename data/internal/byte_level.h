// The byte-level alphabet of GPT-2-style BPE (GPT-2's bytes_to_unicode(),
// Hugging Face's ByteLevel): each byte is written as one printable
// character, so that a vocabulary of strings covers every byte string.
// Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
// the others are U+0100, U+0101, ... in byte order (space is U+0120 'Ġ').
//
// Thread-safety: constant tables.
//
//   ByteLevelCharacter(' ');  // "\xC4\xA0" (U+0120)
//   std::string bytes;
//   ByteLevelDecode("\xC4\xA0the", &bytes);  // true, bytes == " the"
#ifndef HLAB_DATA_INTERNAL_BYTE_LEVEL_H_
#define HLAB_DATA_INTERNAL_BYTE_LEVEL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace hlab::data::internal {

// The UTF-8 of the character standing for `byte`.
const std::string& ByteLevelCharacter(unsigned char byte);

// Appends the bytes that the byte-level characters of `token` stand for to
// `*bytes`. False (and `*bytes` unchanged) when a character of `token` is
// not in the alphabet.
bool ByteLevelDecode(absl::string_view token, std::string* bytes);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_BYTE_LEVEL_H_
