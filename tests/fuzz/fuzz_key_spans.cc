// libFuzzer target: LongPPL key spans (data/key_spans.h), hlab's JSONL form
// and PKU-ML/LongPPL's slice lines. Any bytes give documents or an error
// naming the file, never a crash; what is read maps back onto byte tokens
// exactly: every byte inside a key range is a key token, and their spans
// merge back to the ranges.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/key_spans.h"

namespace {

// Byte tokens of `doc.text`, mapped onto its ranges and back.
void CheckRoundTrip(const hlab::data::KeySpanDocument& doc) {
  std::vector<hlab::data::ByteSpan> bytes(doc.text.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = {static_cast<int64_t>(i), static_cast<int64_t>(i + 1)};
  }
  absl::StatusOr<std::vector<int64_t>> key =
      hlab::data::KeyTokenIndices(doc, doc.text, bytes);
  if (!key.ok()) std::abort();
  if (hlab::data::KeyRangesOfTokens(bytes, *key) != doc.key_ranges) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<hlab::data::KeySpanDocument>> docs =
      hlab::data::ParseKeySpansJsonl(input, "keys.jsonl");
  if (docs.ok()) {
    for (const hlab::data::KeySpanDocument& doc : *docs) CheckRoundTrip(doc);
  } else if (docs.status().message().find("keys.jsonl") == std::string::npos) {
    std::abort();
  }
  // A slice line, then the text it indexes.
  const size_t newline = input.find('\n');
  if (newline == std::string::npos) return 0;
  hlab::data::KeySpanDocument doc;
  doc.id = "slice_0.txt";
  doc.text = input.substr(newline + 1);
  absl::StatusOr<std::vector<hlab::data::ByteSpan>> ranges =
      hlab::data::ParseLongPplSlice(input.substr(0, newline), doc.text,
                                    "slice_0.txt");
  if (!ranges.ok()) {
    if (ranges.status().message().find("slice_0.txt") == std::string::npos) {
      std::abort();
    }
    return 0;
  }
  doc.key_ranges = *std::move(ranges);
  CheckRoundTrip(doc);
  return 0;
}
