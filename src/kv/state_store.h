// The state store: recurrent-state snapshots (model/recurrent_state.h) kept in KV
// pages, so that the KV memory (--kv-memory) holds pages and snapshots together and
// one budget, one reclaimer and one set of counters cover both.
//
//   snapshot h ── pages [p0 p1 p2]      the snapshot's floats, copied byte for byte
//                 n_tokens               into the pages' bytes, in page order (the
//                 floats                 last page partly used)
//
// A stored snapshot holds one cache reference on each of its pages (the pages are
// "cached": PagePool::n_cached counts them). Its owner — a radix node (kv/
// radix_index.h) — releases it when the node goes, which frees the pages. A snapshot
// is written once and never changes.
//
// Handles are indices into a flat slot array with a free list. Simulated pools (no
// page store) keep the floats on the heap instead, with the same page accounting, so
// data-structure tests stay cheap.
//
// Engine thread only.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kv/page_pool.h"

namespace pc {

class StateStore {
 public:
  explicit StateStore(PagePool& pool) : pool_(pool) {}
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Stores `floats` (the state after n_tokens tokens) in fresh pages; -1 when the pool
  // could not supply them (after asking its reclaimer). Allocation may run the pool's
  // reclaimer, which may release other snapshots.
  int32_t put(std::span<const float> floats, int64_t n_tokens);
  // Copies snapshot h's floats into `out` (out.size() must be its size).
  void get(int32_t h, std::span<float> out) const;
  int64_t n_tokens(int32_t h) const { return slots_[h].n_tokens; }
  int64_t n_floats(int32_t h) const { return slots_[h].n_floats; }
  // Drops snapshot h; returns the bytes of pages that became free.
  size_t release(int32_t h);

  int64_t count() const { return count_; }
  // Bytes of the pages the snapshots hold (what they take from the KV memory).
  int64_t bytes() const { return pages_held_ * int64_t(pool_.page_bytes()); }
  int32_t pages_for(int64_t n_floats) const;

 private:
  struct Slot {
    bool alive = false;
    int64_t n_tokens = 0;
    int64_t n_floats = 0;
    std::vector<int32_t> pages;
    std::vector<float> heap;  // simulated pool only
  };
  PagePool& pool_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
  int64_t count_ = 0;
  int64_t pages_held_ = 0;
};

}  // namespace pc
