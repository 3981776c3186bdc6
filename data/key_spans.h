// Key spans: the text a LongPPL reference selected, as character ranges of
// each document, so that key tokens chosen by one model (and tokenizer) can
// be scored on another. Two file forms are read:
//
//   hlab's JSONL, one document a line (docs/evaluation.md, "Key tokens from
//   another tool"):
//     {"id": "gov-7", "text": "...", "key_spans": [[120, 131], [488, 490]]}
//   offsets are code points (Python's str indices) unless the line says
//   "offsets": "bytes" (UTF-8 byte offsets); spans are half-open,
//   sorted and disjoint.
//
//   PKU-ML/LongPPL's own output: find_key_token(..., save_path) writes one
//   slice_<i>.txt per document, one line "[s, e];[s, e];..." of merged,
//   half-open code-point ranges of the Llama 3 tokenizer's offset_mapping
//   (leading spaces included; an empty file: no key tokens), read with the
//   texts, a JSONL with "text" in slice order (slice_0.txt is line 1's).
//
// Offsets become UTF-8 byte ranges (KeySpanDocument::key_ranges), adjacent
// ranges merged. A token of another tokenizer is key when its byte span
// (data::Tokenizer::EncodeWithOffsets) lies entirely inside one range, as
// the reference's cal_overlap decides; a token cut from a character that a
// range leaves out is not. This is the LongPPL paper's cross-tokenizer
// LongPPL, and lets an hlab reference select for a model whose tokenizer is
// not its own (KeyRangesOfTokens, then KeyTokenIndices).
//
// Bad input is refused with InvalidArgument naming the file (and line), the
// document and the span: a span outside the text, reversed or empty, spans
// unsorted or overlapping, text that differs from the evaluated document, a
// file without documents. One exception is the reference's own: when a
// character is split between two key tokens (bytes of one character in
// two Llama 3 tokens), both carry the character's offsets, so a slice range
// may begin one code point before the previous one ends; it is merged.
//
// Thread-safety: pure functions and plain values.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<KeySpanDocument> docs,
//                         ReadLongPplSlices("key_text/llama3", "texts.jsonl"));
//   EncodedText enc = tok->EncodeWithOffsets(docs[0].text);
//   HLAB_ASSIGN_OR_RETURN(std::vector<int64_t> key,
//                         KeyTokenIndices(docs[0], docs[0].text, enc.spans));
#ifndef HLAB_DATA_KEY_SPANS_H_
#define HLAB_DATA_KEY_SPANS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/tokenizer.h"

namespace hlab::data {

// One document and its key text.
struct KeySpanDocument {
  std::string id;     // the line's "id", else "line N"; "slice_<i>.txt"
  std::string where;  // "FILE:LINE" or "DIR/slice_<i>.txt", for errors
  std::string text;   // UTF-8
  // Byte ranges of `text`, sorted, disjoint, not adjacent, not empty.
  std::vector<ByteSpan> key_ranges;
};

// Reads hlab's JSONL form. NotFound naming a missing file; InvalidArgument
// "FILE:LINE (document ID): ..." naming the field and span for a bad line
// (not a JSON object; no string "text"; "key_spans" not a list of [start,
// end] integer pairs; a span reversed, empty, outside the text, or starting
// before the one before it ends; "offsets" neither "code_points" nor
// "bytes"; an id given twice), and "FILE: no documents" for a file without
// one. Lines may carry other fields.
absl::StatusOr<std::vector<KeySpanDocument>> ReadKeySpansJsonl(
    const std::string& path);

// The same, from the file's contents; `where` names it in errors.
absl::StatusOr<std::vector<KeySpanDocument>> ParseKeySpansJsonl(
    absl::string_view contents, absl::string_view where);

// Reads PKU-ML/LongPPL's slice files in `slice_dir` with the texts of
// `texts_path` (JSONL, "text" of each line; "id" too when present).
// NotFound for a missing directory, texts file or slice_<i>.txt (naming
// it); InvalidArgument for a bad texts line, "FILE: no documents", a
// slice_<j>.txt beyond the texts, or a bad range (naming the slice file,
// the range and the text's length in characters).
absl::StatusOr<std::vector<KeySpanDocument>> ReadLongPplSlices(
    const std::string& slice_dir, const std::string& texts_path);

// The byte ranges of one slice file's contents for `text`; `where` names
// the file in errors (as above).
absl::StatusOr<std::vector<ByteSpan>> ParseLongPplSlice(
    absl::string_view contents, absl::string_view text,
    absl::string_view where);

// The byte offset of each code point of UTF-8 `text` (Python's str index),
// then text.size(): code point c starts at result[c]. A byte that is not
// a UTF-8 continuation byte starts a code point, as Python's decoder
// counts valid UTF-8.
std::vector<int64_t> CodePointByteOffsets(absl::string_view text);

// The tokens that are key: indices i, ascending, of the tokens whose span
// token_spans[i] lies entirely inside one of doc.key_ranges (an empty span
// never does). `token_spans` are those of `evaluated_text`'s tokens (all
// of them, or the first n when the evaluation truncates), in order.
// InvalidArgument naming the document when `evaluated_text` differs from
// doc.text (the first differing byte, and the key range there if any) or a
// token span is outside it or out of order.
absl::StatusOr<std::vector<int64_t>> KeyTokenIndices(
    const KeySpanDocument& doc, absl::string_view evaluated_text,
    absl::Span<const ByteSpan> token_spans);

// The key text of key tokens: the union of token_spans[i] over
// `key_indices` (ascending, in range), as sorted byte ranges with adjacent
// and overlapping ones merged and empty ones dropped. What an hlab
// reference's selection on its own tokens gives another tokenizer.
std::vector<ByteSpan> KeyRangesOfTokens(absl::Span<const ByteSpan> token_spans,
                                        absl::Span<const int64_t> key_indices);

}  // namespace hlab::data

#endif  // HLAB_DATA_KEY_SPANS_H_
