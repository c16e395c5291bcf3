#include "kv/kv_storage.h"

#include <sys/mman.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/quants.h"
#include "kernels/elementwise.h"

namespace pc {

KvStorage::KvStorage(KvShape shape, int32_t n_pages)
    : KvPageStore(shape, n_pages), bytes_(size_t(n_pages) * shape.bytes_per_page()) {
  if (shape.row_bytes() == 0)
    throw Error(std::string("KV type ") + kv_type_name(shape.kv_type) + " cannot store heads of " +
                std::to_string(shape.head_dim) + " dimensions (needs a multiple of 32, or 8 or 16)");
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // A decode step reads a few KiB of every page of the context per layer and
  // head, pages far apart: with 2 MiB pages far fewer TLB misses (advice only).
  madvise(p, bytes_, MADV_HUGEPAGE);
#endif
  data_ = static_cast<uint8_t*>(p);
}

KvStorage::~KvStorage() { munmap(data_, bytes_); }

void KvStorage::layer_blocks(int layer, std::span<const int32_t> pages, const uint16_t** k_out,
                             const uint16_t** v_out) const {
  for (size_t i = 0; i < pages.size(); ++i) {
    k_out[i] = k(pages[i], layer);
    v_out[i] = v(pages[i], layer);
  }
}

void KvStorage::write_slots(int layer, int kv_head, std::span<const KvSlot> slots, const float* kf,
                            const float* vf, size_t stride) {
  const int P = shape().page_size, hd = shape().head_dim;
  const size_t rb = shape().row_bytes();
  if (!f16()) {  // slot-major rows, each quantized from its own values
    for (size_t i = 0; i < slots.size(); ++i) {
      const KvSlot& t = slots[i];
      const size_t row = (size_t(kv_head) * P + t.slot) * rb;
      kv_quantize_row(shape().kv_type, kf + i * stride, hd, k_bytes(t.page, layer) + row);
      kv_quantize_row(shape().kv_type, vf + i * stride, hd, v_bytes(t.page, layer) + row);
    }
    return;
  }
  const size_t slab = size_t(kv_head) * P * hd;  // the head's K (or V) slab in a block
  uint16_t kr[512];
  for (size_t i = 0; i < slots.size(); ++i) {
    const KvSlot& t = slots[i];
    // The slot's key: dimension d at kc[d * w] (k_layout.h).
    uint16_t* kc = k(t.page, layer) + slab + k_index(P, hd, t.slot, 0);
    const int w = k_block_width(P, t.slot);
    for (int d0 = 0; d0 < hd; d0 += 512) {
      const int n = hd - d0 < 512 ? hd - d0 : 512;
      f32_to_f16_row(kf + i * stride + d0, kr, n);
      for (int d = 0; d < n; ++d) kc[size_t(d0 + d) * w] = kr[d];
    }
    f32_to_f16_row(vf + i * stride, v(t.page, layer) + slab + size_t(t.slot) * hd, hd);
  }
}

void KvStorage::read_slot(int layer, int32_t page, int slot, float* k_out, float* v_out) const {
  const KvShape& s = shape();
  const int P = s.page_size, hd = s.head_dim;
  const size_t rb = s.row_bytes();
  for (int g = 0; g < s.n_kv_head; ++g) {
    const size_t row = (size_t(g) * P + slot) * rb;
    kv_dequantize_row(s.kv_type, base(page, layer) + s.block_bytes() + row, hd, v_out + size_t(g) * hd);
    if (!f16()) {
      kv_dequantize_row(s.kv_type, base(page, layer) + row, hd, k_out + size_t(g) * hd);
    } else {
      const uint16_t* kh = k(page, layer) + size_t(g) * P * hd;
      for (int d = 0; d < hd; ++d) k_out[size_t(g) * hd + d] = fp16_to_fp32(kh[k_index(P, hd, slot, d)]);
    }
  }
}

void KvStorage::copy_slots(int32_t dst, int32_t src, int n_slots) { copy_range(dst, 0, src, 0, n_slots); }

void KvStorage::copy_range(int32_t dst, int dst_slot, int32_t src, int src_slot, int n) {
  copy_range_rotated(dst, dst_slot, src, src_slot, n, nullptr);
}

void KvStorage::copy_range_rotated(int32_t dst, int dst_slot, int32_t src, int src_slot, int n,
                                   const KeyRotation* rot) {
  if (n <= 0) return;
  const KvShape& s = shape();
  const int P = s.page_size, hd = s.head_dim;
  const size_t rb = s.row_bytes();
  for (int l = 0; l < s.n_layer; ++l) {
    const KeyRotation* r = rot ? &rot[l] : nullptr;
    for (int h = 0; h < s.n_kv_head; ++h) {
      const size_t slab = size_t(h) * P * rb;  // the head's K (or V) slab, bytes
      if (!f16()) {
        copy_k_rows(s.kv_type, k_bytes(dst, l) + slab + dst_slot * rb, k_bytes(src, l) + slab + src_slot * rb, n, hd,
                    r, scratch_);
      } else if (!r && dst_slot == 0 && src_slot == 0) {
        copy_k_slots(k(dst, l) + size_t(h) * P * hd, k(src, l) + size_t(h) * P * hd, P, hd, n);
      } else {
        copy_k_f16(k(dst, l) + size_t(h) * P * hd, dst_slot, k(src, l) + size_t(h) * P * hd, src_slot, n, P, hd, r,
                   scratch_);
      }
      std::memcpy(v_bytes(dst, l) + slab + dst_slot * rb, v_bytes(src, l) + slab + src_slot * rb, n * rb);
    }
  }
  std::memcpy(pos(dst) + dst_slot, pos(src) + src_slot, size_t(n) * sizeof(int32_t));
}

void KvStorage::update_keys(int32_t page, int first, int end, KeyRowsOp& op) {
  const KvShape& s = shape();
  const int P = s.page_size, hd = s.head_dim, n = end - first;
  if (n <= 0) return;
  const size_t rb = s.row_bytes();
  std::vector<float> rows(size_t(n) * hd);
  for (int l = 0; l < s.n_layer; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      if (!f16()) {
        uint8_t* K = k_bytes(page, l) + size_t(h) * P * rb + size_t(first) * rb;  // the head's rows from `first`
        for (int t = 0; t < n; ++t) kv_dequantize_row(s.kv_type, K + t * rb, hd, rows.data() + size_t(t) * hd);
        op.apply(l, rows.data(), n);
        for (int t = 0; t < n; ++t) kv_quantize_row(s.kv_type, rows.data() + size_t(t) * hd, hd, K + t * rb);
        continue;
      }
      uint16_t* K = k(page, l) + size_t(h) * P * hd;  // the head's slab
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < hd; ++d) rows[size_t(t) * hd + d] = fp16_to_fp32(K[k_index(P, hd, first + t, d)]);
      op.apply(l, rows.data(), n);
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < hd; ++d) K[k_index(P, hd, first + t, d)] = fp32_to_fp16(rows[size_t(t) * hd + d]);
    }
}

void KvStorage::read_page(int32_t page, int n_slots, uint8_t* out) const {
  const KvShape& s = shape();
  const size_t bytes = s.bytes_per_page();
  const uint8_t* src = base(page, 0);
  if (n_slots == s.page_size) {
    std::memcpy(out, src, bytes);
    return;
  }
  std::memset(out, 0, bytes);
  const size_t row = s.row_bytes();  // one slot of one head
  const size_t head = row * s.page_size;
  // The page's slabs in order: per layer n_kv_head K slabs, then n_kv_head V slabs.
  for (size_t slab = 0; slab < size_t(2) * s.n_layer * s.n_kv_head; ++slab) {
    if (f16() && slab / s.n_kv_head % 2 == 0) {  // a head's F16 K (k_layout.h)
      copy_k_slots(reinterpret_cast<uint16_t*>(out + slab * head), reinterpret_cast<const uint16_t*>(src + slab * head),
                   s.page_size, s.head_dim, n_slots);
    } else {  // slot-major rows
      std::memcpy(out + slab * head, src + slab * head, row * n_slots);
    }
  }
}

void KvStorage::write_page(int32_t page, const uint8_t* bytes) {
  std::memcpy(base(page, 0), bytes, shape().bytes_per_page());
}

}  // namespace pc
