#include "data/internal/llama3_pretokenizer.h"

#include "data/internal/char_classes.h"

namespace hlab::data::internal {
namespace {

bool IsNewline(char c) { return c == '\r' || c == '\n'; }

// Length of the case-insensitive letter `lower` at `text[pos]` (its ASCII
// upper or lower case, or U+017F for 's'), or 0.
size_t FoldedLetterAt(absl::string_view text, size_t pos, char lower) {
  if (pos >= text.size()) return 0;
  char c = text[pos];
  if (c == lower || c == lower - ('a' - 'A')) return 1;
  if (lower == 's' && text.substr(pos, 2) == "\xC5\xBF") return 2;
  return 0;
}

// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `pos`: its length, or 0.
size_t ContractionAt(absl::string_view text, size_t pos) {
  if (text[pos] != '\'') return 0;
  size_t at = pos + 1;
  for (char c : {'s', 't', 'm', 'd'}) {
    if (size_t n = FoldedLetterAt(text, at, c); n > 0) return 1 + n;
  }
  for (const char* pair : {"re", "ve", "ll"}) {
    size_t first = FoldedLetterAt(text, at, pair[0]);
    if (first == 0) continue;
    if (size_t second = FoldedLetterAt(text, at + first, pair[1]); second > 0) {
      return 1 + first + second;
    }
  }
  return 0;
}

// Length of the match at `pos` (always >= 1).
size_t MatchAt(absl::string_view text, size_t pos) {
  if (size_t n = ContractionAt(text, pos); n > 0) return n;
  size_t length = 0;
  CharClass first = ClassifyAt(text, pos, &length);
  size_t next = pos + length;
  size_t next_length = 0;
  CharClass second = next < text.size()
                         ? ClassifyAt(text, next, &next_length)
                         : CharClass::kSpace;  // unused when at the end
  bool has_second = next < text.size();

  // `[^\r\n\p{L}\p{N}]?\p{L}+`
  if (first == CharClass::kLetter) {
    return RunEnd(text, pos, CharClass::kLetter) - pos;
  }
  if (first != CharClass::kNumber && !IsNewline(text[pos]) && has_second &&
      second == CharClass::kLetter) {
    return RunEnd(text, next, CharClass::kLetter) - pos;
  }
  // `\p{N}{1,3}`
  if (first == CharClass::kNumber) {
    size_t end = next;
    for (int count = 1; count < 3 && end < text.size(); ++count) {
      size_t n = 0;
      if (ClassifyAt(text, end, &n) != CharClass::kNumber) break;
      end += n;
    }
    return end - pos;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t symbols = absl::string_view::npos;
  if (first == CharClass::kOther) {
    symbols = pos;
  } else if (text[pos] == ' ' && has_second && second == CharClass::kOther) {
    symbols = next;
  }
  if (symbols != absl::string_view::npos) {
    size_t end = RunEnd(text, symbols, CharClass::kOther);
    while (end < text.size() && IsNewline(text[end])) ++end;
    return end - pos;
  }
  // Whitespace from here on. `\s*[\r\n]+`: up to the run's last newline
  // (\r and \n bytes occur in UTF-8 only as themselves).
  size_t end = RunEnd(text, pos, CharClass::kSpace);
  for (size_t p = end; p > pos; --p) {
    if (IsNewline(text[p - 1])) return p - pos;
  }
  // `\s+(?!\S)`: the run, less its last character when a non-space follows
  // (the lookahead fails at the run's end, so the engine backs off one).
  if (end == text.size()) return end - pos;
  if (next < end) {
    size_t last = pos;  // start of the run's last character
    for (size_t p = pos; p < end;) {
      size_t n = 0;
      ClassifyAt(text, p, &n);
      last = p;
      p += n;
    }
    return last - pos;
  }
  // `\s+`: a single whitespace character before a non-space.
  return end - pos;
}

}  // namespace

void Llama3PreTokenize(absl::string_view text,
                       std::vector<absl::string_view>* pieces) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length = MatchAt(text, pos);
    pieces->push_back(text.substr(pos, length));
    pos += length;
  }
}

}  // namespace hlab::data::internal
