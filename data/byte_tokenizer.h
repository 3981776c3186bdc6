// The byte-level tokenizer's fixed id layout: ids 0-255 are the bytes of the
// UTF-8 text, 256 separates packed documents, 257 pads batches. The default
// tokenizer for tiny models; the synthetic corpus (data/synthetic_corpus.h)
// uses the same layout so its models and prepared-text models share a
// vocabulary.
//
// Thread-safety: constants and a pure function.
//
//   data::Vocabulary vocab = data::ByteVocabulary();
//   // vocab.size == 258, vocab.end_of_document == 256, vocab.pad == 257
#ifndef HLAB_DATA_BYTE_TOKENIZER_H_
#define HLAB_DATA_BYTE_TOKENIZER_H_

#include <cstdint>

#include "data/corpus.h"

namespace hlab::data {

inline constexpr int32_t kByteEndOfDocument = 256;
inline constexpr int32_t kBytePad = 257;
inline constexpr int64_t kByteVocabSize = 258;
// Tokenizer name (Vocabulary::tokenizer) and spec of the byte-level layout.
inline constexpr char kByteTokenizerName[] = "byte";

// The byte-level vocabulary: {258, 256, 257, "byte"}.
inline Vocabulary ByteVocabulary() {
  Vocabulary vocab;
  vocab.size = kByteVocabSize;
  vocab.end_of_document = kByteEndOfDocument;
  vocab.pad = kBytePad;
  vocab.tokenizer = kByteTokenizerName;
  return vocab;
}

}  // namespace hlab::data

#endif  // HLAB_DATA_BYTE_TOKENIZER_H_
