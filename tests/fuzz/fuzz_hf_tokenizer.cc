// libFuzzer target: a Hugging Face tokenizer.json
// (data/internal/hf_tokenizer_json.h ParseHfTokenizerJson), the file
// `hf:DIR` reads, and the hand-written pre-tokenizers it runs on text. Any
// bytes give a definition or an error naming the file, never a crash; split
// as text, they give non-empty pieces that concatenate back to the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/internal/gpt2_pretokenizer.h"
#include "data/internal/hf_tokenizer_json.h"
#include "data/internal/llama3_pretokenizer.h"

namespace {

void CheckPieces(const std::vector<absl::string_view>& pieces,
                 absl::string_view text) {
  std::string joined;
  for (absl::string_view piece : pieces) {
    if (piece.empty()) std::abort();
    joined.append(piece.data(), piece.size());
  }
  if (joined != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)hlab::data::internal::ParseHfTokenizerJson(text, "tokenizer.json");
  std::vector<absl::string_view> pieces;
  hlab::data::internal::Llama3PreTokenize(text, &pieces);
  CheckPieces(pieces, text);
  CheckPieces(hlab::data::internal::Gpt2PreTokenize(text), text);
  return 0;
}
