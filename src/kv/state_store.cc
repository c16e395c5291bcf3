#include "kv/state_store.h"

#include <algorithm>
#include <cstring>

#include "kv/kv_check.h"

namespace pc {

namespace {

// The bytes of page p (one contiguous run of page_bytes(), kv/kv_storage.h).
uint8_t* page_bytes_of(KvStorage& s, int32_t p) { return reinterpret_cast<uint8_t*>(s.k(p, 0)); }

}  // namespace

StateStore::~StateStore() {
  for (int32_t h = 0; h < int32_t(slots_.size()); ++h)
    if (slots_[h].alive) release(h);
}

int32_t StateStore::pages_for(int64_t n_floats) const {
  const int64_t b = n_floats * int64_t(sizeof(float)), P = int64_t(pool_.page_bytes());
  return int32_t((b + P - 1) / P);
}

int32_t StateStore::put(std::span<const float> floats, int64_t n_tokens) {
  // Pages first: allocation may run the reclaimer, which may release slots.
  std::vector<int32_t> pages;
  const int32_t n = pages_for(int64_t(floats.size()));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = pool_.alloc();
    if (p < 0) {
      for (int32_t q : pages) pool_.unref(q);
      return -1;
    }
    pages.push_back(p);
  }
  int32_t h;
  if (!free_.empty()) {
    h = free_.back();
    free_.pop_back();
  } else {
    h = int32_t(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[h];
  s.alive = true;
  s.n_tokens = n_tokens;
  s.n_floats = int64_t(floats.size());
  s.pages = std::move(pages);
  KvStorage* store = pool_.storage();
  const size_t P = pool_.page_bytes();
  const uint8_t* src = reinterpret_cast<const uint8_t*>(floats.data());
  size_t left = floats.size() * sizeof(float);
  for (int32_t p : s.pages) {
    if (store) std::memcpy(page_bytes_of(*store, p), src, std::min(left, P));
    src += std::min(left, P);
    left -= std::min(left, P);
    pool_.set_fill(p, pool_.page_size());  // written: nothing appends to it
    pool_.ref_cache(p);
    pool_.unref(p);  // only the cache reference is left: a cached page
  }
  if (!store) s.heap.assign(floats.begin(), floats.end());
  ++count_;
  pages_held_ += int64_t(s.pages.size());
  return h;
}

void StateStore::get(int32_t h, std::span<float> out) const {
  const Slot& s = slots_[h];
  PC_KV_CHECK(s.alive && int64_t(out.size()) == s.n_floats, "state snapshot read with the wrong size");
  KvStorage* store = pool_.storage();
  if (!store) {
    std::copy(s.heap.begin(), s.heap.end(), out.begin());
    return;
  }
  const size_t P = pool_.page_bytes();
  uint8_t* dst = reinterpret_cast<uint8_t*>(out.data());
  size_t left = out.size() * sizeof(float);
  for (int32_t p : s.pages) {
    std::memcpy(dst, page_bytes_of(*store, p), std::min(left, P));
    dst += std::min(left, P);
    left -= std::min(left, P);
  }
}

size_t StateStore::release(int32_t h) {
  Slot& s = slots_[h];
  PC_KV_CHECK(s.alive, "release of a state snapshot that is not stored");
  size_t freed = 0;
  for (int32_t p : s.pages)
    if (pool_.unref_cache(p)) freed += pool_.page_bytes();
  pages_held_ -= int64_t(s.pages.size());
  --count_;
  s.alive = false;
  s.pages.clear();
  s.heap.clear();
  s.heap.shrink_to_fit();
  free_.push_back(h);
  return freed;
}

}  // namespace pc
