#include "data/internal/bpe_merger.h"

#include <queue>

namespace hlab::data::internal {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, or -1
  int32_t next;  // index of the next live symbol, or -1
  bool live;
};

// A pair that may be merged: symbols[pos] and the symbol after it.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged;
  // Lowest rank first, then leftmost.
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

void BpeMerger::AddMerge(int32_t left, int32_t right, int32_t merged) {
  merges_[Key(left, right)] = Merge{next_rank_++, merged};
}

void BpeMerger::Encode(absl::string_view word,
                       std::vector<int32_t>* ids) const {
  const int32_t n = static_cast<int32_t>(word.size());
  if (n == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i - 1,
                  i + 1 < n ? i + 1 : -1, true};
  }
  std::vector<Candidate> storage;
  storage.reserve(static_cast<size_t>(n));
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue(
      std::greater<>(), std::move(storage));
  auto push = [&](int32_t pos) {
    int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const Merge* m = Find(symbols[pos].id, symbols[next].id)) {
      queue.push({m->rank, pos, m->merged});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Stale when either side has merged since this candidate was queued.
    const Merge* m = Find(left.id, right.id);
    if (m == nullptr || m->merged != top.merged) continue;
    left.id = top.merged;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    ids->push_back(symbols[i].id);
}

}  // namespace hlab::data::internal
