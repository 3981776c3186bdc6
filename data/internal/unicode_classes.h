// Unicode character classes for GPT-2's pre-tokenizer: \p{L} and \p{N} as
// the Python `regex` module defines them, from a generated range table
// (scripts/gen_unicode_classes.py writes unicode_classes.cc).
//
// Thread-safety: pure functions over constant tables.
//
//   IsUnicodeLetter(0xE9);  // true: é
//   IsUnicodeNumber(0x663); // true: Arabic-Indic digit three
#ifndef HLAB_DATA_INTERNAL_UNICODE_CLASSES_H_
#define HLAB_DATA_INTERNAL_UNICODE_CLASSES_H_

#include <cstdint>

namespace hlab::data::internal {

bool IsUnicodeLetter(uint32_t code_point);  // \p{L}
bool IsUnicodeNumber(uint32_t code_point);  // \p{N}

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_UNICODE_CLASSES_H_
