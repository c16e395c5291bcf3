// Storage of KV pages: one preallocated buffer, addressed by page id.
//
// A page holds the keys and values of `page_size` consecutive token slots of one
// sequence, for every layer. Layout of page p (all F16):
//
//   page p ─┬─ layer 0 ─┬─ K [n_kv_head][page_size × head_dim]   (K stored after RoPE)
//           │           └─ V [n_kv_head][page_size][head_dim]
//           ├─ layer 1 ...
//           └─ layer L-1
//
// so a page is one contiguous run of bytes (easy to move between tiers) and a
// head's keys within a page are contiguous. V is slot-major (a slot's values
// are one row). K is dimension-major in blocks of 8 slots (k_index()): the
// attention kernels score 8 keys at once with one load per dimension, straight
// from the page (no transposing copy per chunk). Per-slot position ids live
// beside, not inside, the tensor bytes. Bookkeeping (reference counts, free
// lists, eviction) is the page pool's job, not this class's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/k_layout.h"

namespace pc {

struct KvShape {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int page_size = 16;  // token slots per page

  // F16 elements of one K (or V) block: one layer, one page.
  size_t block_elems() const { return size_t(n_kv_head) * page_size * head_dim; }
  size_t bytes_per_page() const { return 2 * size_t(n_layer) * block_elems() * sizeof(uint16_t); }
  size_t bytes_per_token() const { return bytes_per_page() / page_size; }
};

class KvStorage {
 public:
  // Reserves n_pages pages of address space; the OS provides (zeroed) memory
  // only as pages are first written, so a large --kv-memory costs nothing up front.
  KvStorage(KvShape shape, int32_t n_pages);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;
  const KvShape& shape() const { return shape_; }
  int32_t n_pages() const { return n_pages_; }

  // K block of (page, layer): [n_kv_head][page_size × head_dim] F16 bits,
  // each head's slab laid out by k_index().
  uint16_t* k(int32_t page, int layer) { return base(page, layer); }
  uint16_t* v(int32_t page, int layer) { return base(page, layer) + shape_.block_elems(); }
  const uint16_t* k(int32_t page, int layer) const { return const_cast<KvStorage*>(this)->k(page, layer); }
  const uint16_t* v(int32_t page, int layer) const { return const_cast<KvStorage*>(this)->v(page, layer); }
  // Position id of each slot of a page: [page_size].
  int32_t* pos(int32_t page) { return pos_.data() + size_t(page) * shape_.page_size; }
  const int32_t* pos(int32_t page) const { return pos_.data() + size_t(page) * shape_.page_size; }
  // The whole page as bytes (for copy-on-write and tier movement).
  uint8_t* page_bytes(int32_t page) { return reinterpret_cast<uint8_t*>(base(page, 0)); }

  // Copies the first `n_slots` slots (all layers, K, V, positions) of src into dst.
  void copy_slots(int32_t dst, int32_t src, int n_slots);

 private:
  uint16_t* base(int32_t page, int layer) {
    return data_ + (size_t(page) * shape_.n_layer + layer) * 2 * shape_.block_elems();
  }
  KvShape shape_;
  int32_t n_pages_;
  size_t bytes_ = 0;
  uint16_t* data_ = nullptr;  // anonymous mapping of n_pages * bytes_per_page()
  std::vector<int32_t> pos_;
};

}  // namespace pc
