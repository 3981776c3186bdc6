// Byte-level token layout shared by the tokenizer and the synthetic corpus:
// ids 0-255 are bytes, then the special tokens.
#ifndef HLAB_DATA_BYTE_TOKENIZER_H_
#define HLAB_DATA_BYTE_TOKENIZER_H_

#include <cstdint>

namespace hlab::data {

inline constexpr int32_t kByteEndOfDocument = 256;
inline constexpr int32_t kBytePad = 257;
inline constexpr int64_t kByteVocabSize = 258;

}  // namespace hlab::data

#endif  // HLAB_DATA_BYTE_TOKENIZER_H_
