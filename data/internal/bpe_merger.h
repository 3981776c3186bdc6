// BpeMerger: the merge loop of byte-level BPE over token ids. A word (the
// raw bytes of one pre-tokenized piece) starts as one symbol per byte; the
// adjacent pair with the lowest merge rank is merged (the leftmost among
// equal ranks), again and again, until no adjacent pair is a merge. This is
// Hugging Face's BPE::merge_word (a priority queue of candidate pairs over
// a linked list of symbols, stale candidates skipped): O(n log n) in the
// word's length, where GPT-2's encoder.py loop is quadratic.
//
// Thread-safety: immutable after the Set/Add calls; Encode() is safe for
// concurrent calls.
//
//   BpeMerger merger;
//   for (int b = 0; b < 256; ++b) merger.SetByteId(b, b);
//   merger.AddMerge('a', 'b', 256);  // rank 0: "ab"
//   std::vector<int32_t> ids;
//   merger.Encode("abc", &ids);      // {256, 'c'}
#ifndef HLAB_DATA_INTERNAL_BPE_MERGER_H_
#define HLAB_DATA_INTERNAL_BPE_MERGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace hlab::data::internal {

class BpeMerger {
 public:
  // The id of the one-byte symbol `byte`.
  void SetByteId(unsigned char byte, int32_t id) { byte_ids_[byte] = id; }

  // The next merge rank: `left` followed by `right` becomes `merged`. A
  // pair added again takes the later rank (as Hugging Face's map does).
  void AddMerge(int32_t left, int32_t right, int32_t merged);

  // Appends the ids of `word` (raw bytes, not empty).
  void Encode(absl::string_view word, std::vector<int32_t>* ids) const;

  // Room for `n` merges without rehashing.
  void Reserve(size_t n) { merges_.reserve(n); }

  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* Find(int32_t left, int32_t right) const {
    auto it = merges_.find(Key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  int32_t byte_ids_[256] = {};
  int32_t next_rank_ = 0;
  absl::flat_hash_map<uint64_t, Merge> merges_;
};

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_BPE_MERGER_H_
