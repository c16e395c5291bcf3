#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cstring>
#include <new>
#include <vector>

namespace pc {

KvStorage::KvStorage(KvShape shape, int32_t n_pages)
    : KvPageStore(shape, n_pages), bytes_(size_t(n_pages) * shape.bytes_per_page()) {
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // A decode step reads a few KiB of every page of the context per layer and
  // head, pages far apart: with 2 MiB pages far fewer TLB misses (advice only).
  madvise(p, bytes_, MADV_HUGEPAGE);
#endif
  data_ = static_cast<uint16_t*>(p);
}

KvStorage::~KvStorage() { munmap(data_, bytes_); }

void KvStorage::layer_blocks(int layer, std::span<const int32_t> pages, const uint16_t** k_out,
                             const uint16_t** v_out) const {
  for (size_t i = 0; i < pages.size(); ++i) {
    k_out[i] = k(pages[i], layer);
    v_out[i] = v(pages[i], layer);
  }
}

void KvStorage::write_slots(int layer, int kv_head, std::span<const KvSlot> slots, const uint16_t* k16,
                            const uint16_t* v16, size_t stride) {
  const int P = shape().page_size, hd = shape().head_dim;
  const size_t slab = size_t(kv_head) * P * hd;  // the head's K (or V) slab in a block
  for (size_t i = 0; i < slots.size(); ++i) {
    const KvSlot& t = slots[i];
    // The slot's key: dimension d at kc[d * w] (k_layout.h).
    uint16_t* kc = k(t.page, layer) + slab + k_index(P, hd, t.slot, 0);
    const int w = k_block_width(P, t.slot);
    const uint16_t* kr = k16 + i * stride;
    for (int d = 0; d < hd; ++d) kc[size_t(d) * w] = kr[d];
    std::memcpy(v(t.page, layer) + slab + size_t(t.slot) * hd, v16 + i * stride, size_t(hd) * sizeof(uint16_t));
  }
}

void KvStorage::copy_slots(int32_t dst, int32_t src, int n_slots) {
  const KvShape& s = shape();
  const size_t row = size_t(s.head_dim);
  for (int l = 0; l < s.n_layer; ++l) {
    for (int h = 0; h < s.n_kv_head; ++h) {
      const size_t off = size_t(h) * s.page_size * row;
      copy_k_slots(k(dst, l) + off, k(src, l) + off, s.page_size, s.head_dim, n_slots);
      std::memcpy(v(dst, l) + off, v(src, l) + off, n_slots * row * sizeof(uint16_t));
    }
  }
  std::memcpy(pos(dst), pos(src), n_slots * sizeof(int32_t));
}

void KvStorage::copy_range(int32_t dst, int dst_slot, int32_t src, int src_slot, int n) {
  const KvShape& s = shape();
  const int P = s.page_size, hd = s.head_dim;
  for (int l = 0; l < s.n_layer; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      const size_t off = size_t(h) * P * hd;
      uint16_t* kd = k(dst, l) + off;
      const uint16_t* ks = k(src, l) + off;
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < hd; ++d) kd[k_index(P, hd, dst_slot + t, d)] = ks[k_index(P, hd, src_slot + t, d)];
      std::memcpy(v(dst, l) + off + size_t(dst_slot) * hd, v(src, l) + off + size_t(src_slot) * hd,
                  size_t(n) * hd * sizeof(uint16_t));
    }
  std::memcpy(pos(dst) + dst_slot, pos(src) + src_slot, size_t(n) * sizeof(int32_t));
}

void KvStorage::update_keys(int32_t page, int n_slots, KeyRowsOp& op) {
  const KvShape& s = shape();
  const int P = s.page_size, hd = s.head_dim;
  std::vector<uint16_t> rows(size_t(n_slots) * hd);
  for (int l = 0; l < s.n_layer; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      uint16_t* K = k(page, l) + size_t(h) * P * hd;  // the head's slab
      for (int t = 0; t < n_slots; ++t)
        for (int d = 0; d < hd; ++d) rows[size_t(t) * hd + d] = K[k_index(P, hd, t, d)];
      op.apply(l, rows.data(), n_slots);
      for (int t = 0; t < n_slots; ++t)
        for (int d = 0; d < hd; ++d) K[k_index(P, hd, t, d)] = rows[size_t(t) * hd + d];
    }
}

void KvStorage::read_page(int32_t page, int n_slots, uint8_t* out) const {
  const KvShape& s = shape();
  const size_t bytes = s.bytes_per_page();
  const auto* src = reinterpret_cast<const uint8_t*>(k(page, 0));
  if (n_slots == s.page_size) {
    std::memcpy(out, src, bytes);
    return;
  }
  std::memset(out, 0, bytes);
  const size_t row = size_t(s.head_dim) * sizeof(uint16_t);  // one slot of one head
  const size_t head = row * s.page_size;
  // The page's slabs in order: per layer n_kv_head K slabs, then n_kv_head V slabs.
  for (size_t slab = 0; slab < size_t(2) * s.n_layer * s.n_kv_head; ++slab) {
    if (slab / s.n_kv_head % 2 == 0) {  // a head's K (k_layout.h)
      copy_k_slots(reinterpret_cast<uint16_t*>(out + slab * head), reinterpret_cast<const uint16_t*>(src + slab * head),
                   s.page_size, s.head_dim, n_slots);
    } else {  // V: slot-major rows
      std::memcpy(out + slab * head, src + slab * head, row * n_slots);
    }
  }
}

void KvStorage::write_page(int32_t page, const uint8_t* bytes) {
  std::memcpy(k(page, 0), bytes, shape().bytes_per_page());
}

}  // namespace pc
