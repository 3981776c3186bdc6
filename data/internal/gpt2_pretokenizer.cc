#include "data/internal/gpt2_pretokenizer.h"

#include "data/internal/char_classes.h"

namespace hlab::data::internal {
namespace {

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
  CharClass first = ClassifyAt(text, pos, &length);
  // ` ?X+` for letters, numbers, others: an optional ASCII space first.
  size_t start = pos;
  CharClass cls = first;
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    size_t next_length = 0;
    CharClass next = ClassifyAt(text, pos + 1, &next_length);
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
    ClassifyAt(text, p, &n);
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
