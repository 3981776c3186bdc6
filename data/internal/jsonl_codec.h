// The JSON-lines text <-> ids filters behind `hlab-data encode|decode`:
// one output line per input line, written as each line is read.
//
//   encode: {"text": "Hello world"}  ->  {"ids":[9906,1917]}
//   decode: {"ids":[9906,1917]}      ->  {"text":"Hello world"}
//
// Decoded bytes that are not valid UTF-8 (an id sequence cut inside a
// character) are written as U+FFFD: JSON strings hold Unicode text.
//
// Thread-safety: a pure function of its streams and the tokenizer.
//
//   HLAB_RETURN_IF_ERROR(EncodeJsonLines(*tok, std::cin, std::cout));
#ifndef HLAB_DATA_INTERNAL_JSONL_CODEC_H_
#define HLAB_DATA_INTERNAL_JSONL_CODEC_H_

#include <istream>
#include <ostream>

#include "absl/status/status.h"
#include "data/tokenizer.h"

namespace hlab::data::internal {

// Reads {"text": ...} lines from `in`, writes {"ids": [...]} lines to
// `out`. InvalidArgument "stdin:LINE: ..." for a line that is not a JSON
// object or has no string field "text" (the lines before it are written).
absl::Status EncodeJsonLines(const Tokenizer& tok, std::istream& in,
                             std::ostream& out);

// Reads {"ids": [...]} lines, writes {"text": ...} lines. InvalidArgument
// "stdin:LINE: ..." for a line that is not a JSON object, has no list
// "ids", or an id that is not an integer in [0, vocabulary size).
absl::Status DecodeJsonLines(const Tokenizer& tok, std::istream& in,
                             std::ostream& out);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_JSONL_CODEC_H_
