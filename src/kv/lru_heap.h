// The eviction order every KV cache shares (prefix index, module store): a min-heap of
// (last use, entry id, generation) with lazy deletion.
//
// A cache pushes an entry when it becomes evictable (unlocked, unpinned) and again
// when it is used; stale heap entries — the entry was used since (last_use moved),
// freed (generation bumped) or is no longer evictable — are skipped by pop(), and the
// heap is rebuilt from the cache's live entries when stale ones outnumber them. Both
// caches therefore pick the least recently used victim in O(log n), with one policy:
// pinned or locked entries are never candidates; expired entries are dropped by the
// caches' own sweeps before any LRU eviction.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace pc {

class LruHeap {
 public:
  struct Item {
    uint64_t last_use;
    int32_t id;
    uint32_t gen;
  };

  // Adds a candidate. `live` bounds the heap: when it holds more than 2 * live + 64
  // items, it is rebuilt from `rebuild()` (which returns every currently evictable
  // entry) before the push.
  template <typename Rebuild>
  void push(const Item& item, size_t live, Rebuild&& rebuild) {
    if (heap_.size() > 2 * live + 64) {
      heap_ = rebuild();
      std::make_heap(heap_.begin(), heap_.end(), Later{});
    }
    heap_.push_back(item);
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  // Pops the least recently used item for which current(item) holds (the entry is
  // alive, unchanged since the push and still evictable); -1 when none is left.
  template <typename Current>
  int32_t pop(Current&& current) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Item it = heap_.back();
      heap_.pop_back();
      if (current(it)) return it.id;
    }
    return -1;
  }
  void clear() { heap_.clear(); }
  size_t size() const { return heap_.size(); }
  size_t capacity_bytes() const { return heap_.capacity() * sizeof(Item); }

 private:
  struct Later {
    bool operator()(const Item& a, const Item& b) const {
      return a.last_use != b.last_use ? a.last_use > b.last_use : a.id > b.id;
    }
  };
  std::vector<Item> heap_;
};

}  // namespace pc
