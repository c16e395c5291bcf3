// The host-memory KV page store: one preallocated buffer, addressed by page id.
//
// A page holds the keys and values of `page_size` consecutive token slots of one
// sequence, for every layer, kept in memory exactly in the serialized page form
// of kv_page_store.h, in the shape's KV type:
//
//   page p ─┬─ layer 0 ─┬─ K [n_kv_head][page_size rows]   (K stored after RoPE)
//           │           └─ V [n_kv_head][page_size rows]
//           ├─ layer 1 ...
//           └─ layer L-1
//
// so a page is one contiguous run of bytes (read_page/write_page are copies)
// and a head's keys within a page are contiguous. V is slot-major (a slot's
// values are one row). F16 K is dimension-major in blocks of 8 slots
// (kernels/k_layout.h): the attention kernels score 8 keys at once with one
// load per dimension, straight from the page (no transposing copy per chunk).
// Quantized K (q8_0, q4_0) is slot-major rows like V (kernels/kv_quant.h): the
// kernels dequantize a chunk of rows as they read it.
// Bookkeeping (reference counts, free lists, eviction) is the page pool's job,
// not this class's.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/k_layout.h"
#include "kv/kv_page_store.h"

namespace pc {

class KvStorage final : public KvPageStore {
 public:
  // Reserves n_pages pages of address space; the OS provides (zeroed) memory
  // only as pages are first written, so a large --kv-memory costs nothing up front.
  KvStorage(KvShape shape, int32_t n_pages);
  ~KvStorage() override;

  // Host views of the bytes, for tests and host-only tools; code that must
  // work with any store uses the KvPageStore operations.
  // K block of (page, layer): for F16 [n_kv_head][page_size × head_dim] F16 bits,
  // each head's slab laid out by k_index(); for the quantized types the rows'
  // bytes (addressed as 16-bit words: k_bytes/v_bytes give bytes).
  uint16_t* k(int32_t page, int layer) { return reinterpret_cast<uint16_t*>(base(page, layer)); }
  uint16_t* v(int32_t page, int layer) { return reinterpret_cast<uint16_t*>(base(page, layer) + shape().block_bytes()); }
  uint8_t* k_bytes(int32_t page, int layer) { return base(page, layer); }
  uint8_t* v_bytes(int32_t page, int layer) { return base(page, layer) + shape().block_bytes(); }
  const uint16_t* k(int32_t page, int layer) const { return const_cast<KvStorage*>(this)->k(page, layer); }
  const uint16_t* v(int32_t page, int layer) const { return const_cast<KvStorage*>(this)->v(page, layer); }

  void layer_blocks(int layer, std::span<const int32_t> pages, const uint16_t** k_out,
                    const uint16_t** v_out) const override;
  void write_slots(int layer, int kv_head, std::span<const KvSlot> slots, const float* k, const float* v,
                   size_t stride) override;
  void read_slot(int layer, int32_t page, int slot, float* k_out, float* v_out) const override;
  void copy_slots(int32_t dst, int32_t src, int n_slots) override;
  void copy_range(int32_t dst, int dst_slot, int32_t src, int src_slot, int n) override;
  void copy_range_rotated(int32_t dst, int dst_slot, int32_t src, int src_slot, int n,
                          const KeyRotation* rot) override;
  void update_keys(int32_t page, int first, int end, KeyRowsOp& op) override;
  void read_page(int32_t page, int n_slots, uint8_t* out) const override;
  void write_page(int32_t page, const uint8_t* bytes) override;

 private:
  uint8_t* base(int32_t page, int layer) const {
    return data_ + (size_t(page) * shape().n_layer + layer) * 2 * shape().block_bytes();
  }
  bool f16() const { return shape().kv_type == KvType::kF16; }
  size_t bytes_ = 0;
  uint8_t* data_ = nullptr;  // anonymous mapping of n_pages * bytes_per_page()
  KeyCopyScratch scratch_;   // copy_range's buffers (engine thread only)
};

}  // namespace pc
