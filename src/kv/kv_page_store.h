// The one interface through which KV page bytes are read and written.
//
// Everything that touches the K/V of a page goes through KvPageStore: the
// forward pass (writes of new tokens' K/V, the attention kernels' reads),
// copy-on-write (PagePool::copy_slots), RoPE relocation of module KV
// (model/rope_shift.h) and the tier entry serializer (tier/entry.h). KvStorage
// (kv_storage.h) is the host-memory store; a device-memory store implements
// the same operations on its own buffers. The operations are coarse — one
// virtual call per layer, per (layer, KV head) or per page, never per element
// — so the hot path pays nothing for the indirection.
//
// Page bytes. Whatever a store keeps in its own memory, a page's *serialized*
// form (read_page / write_page, the payload of a tier entry) is, for KV type f16:
//
//   page ─┬─ layer 0 ─┬─ K [n_kv_head][page_size × head_dim]   F16, after RoPE, kernels/k_layout.h
//         │           └─ V [n_kv_head][page_size][head_dim]    F16, slot-major
//         ├─ layer 1 ...
//         └─ layer L-1                                          bytes_per_page() in all
//
// and for the quantized types (q8_0, q4_0; rows as kernels/kv_quant.h defines them):
//
//   page ─┬─ layer 0 ─┬─ K [n_kv_head][page_size][row_bytes]   after RoPE, slot-major rows
//         │           └─ V [n_kv_head][page_size][row_bytes]
//         ├─ layer 1 ...
//         └─ layer L-1
//
// Positions. The position id of each slot is host metadata kept by the base
// class for every store (pos()): only host code reads it (relocation, the
// serializer), never a kernel.
//
// Threads: the engine thread owns a store. A tier worker may call read_page()
// on slots below their page's fill while the engine thread writes other slots
// or pages; every store must allow that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/k_relocate.h"
#include "kernels/kv_quant.h"

namespace pc {

struct KvShape {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int page_size = 16;  // token slots per page
  KvType kv_type = KvType::kF16;

  // Bytes of one head's K (or V) row of one token (0: the type cannot store it).
  size_t row_bytes() const { return kv_row_bytes(kv_type, head_dim); }
  // Bytes of one K (or V) block: one layer, one page, every KV head.
  size_t block_bytes() const { return size_t(n_kv_head) * page_size * row_bytes(); }
  size_t bytes_per_page() const { return 2 * size_t(n_layer) * block_bytes(); }
  size_t bytes_per_token() const { return bytes_per_page() / page_size; }
};

// One token slot: slot `slot` of page `page`.
struct KvSlot {
  int32_t page = -1;
  int32_t slot = 0;
};

// An operation on the keys of one KV head of one layer of a page, given as F32
// rows: rows[s * head_dim + d] is dimension d of slot s, s in [0, n_rows).
// The store decodes the rows (exact for every KV type), calls apply() with their
// layer and stores what it left there as a write would (F16 rounding, or each row
// quantized from its own values).
class KeyRowsOp {
 public:
  virtual void apply(int layer, float* rows, int n_rows) = 0;

 protected:
  ~KeyRowsOp() = default;
};

class KvPageStore {
 public:
  virtual ~KvPageStore() = default;
  KvPageStore(const KvPageStore&) = delete;
  KvPageStore& operator=(const KvPageStore&) = delete;

  const KvShape& shape() const { return shape_; }
  int32_t n_pages() const { return n_pages_; }

  // Position id of each slot of a page: [page_size], -1 where never written.
  int32_t* pos(int32_t page) { return pos_.data() + size_t(page) * shape_.page_size; }
  const int32_t* pos(int32_t page) const { return pos_.data() + size_t(page) * shape_.page_size; }

  // The attention kernels' view of one layer: for each page of `pages`, the
  // address of its K block and its V block of `layer` in the store's memory
  // (k_out[i], v_out[i]; laid out as the page bytes above: F16, K by
  // kernels/k_layout.h; or the quantized types' rows, addressed as 16-bit words
  // though they are bytes). Valid until the pages are written again.
  virtual void layer_blocks(int layer, std::span<const int32_t> pages, const uint16_t** k_out,
                            const uint16_t** v_out) const = 0;

  // Writes the K and V of one KV head of `layer` for tokens into their slots:
  // token i's key is k[i * stride, + head_dim), its value v[i * stride, +
  // head_dim), F32, going to slots[i], stored in the shape's KV type (F16 rounded
  // to nearest even, or each row quantized from its own values: kernels/kv_quant.h).
  // In span order, so of two tokens naming one slot the last wins. Calls for
  // different KV heads touch disjoint bytes and may run concurrently.
  virtual void write_slots(int layer, int kv_head, std::span<const KvSlot> slots, const float* k,
                           const float* v, size_t stride) = 0;
  // Slot `slot` of `page`: layer `layer`'s K and V of every KV head, decoded to F32
  // (k_out, v_out: [n_kv_head][head_dim]).
  virtual void read_slot(int layer, int32_t page, int slot, float* k_out, float* v_out) const = 0;

  // Copies slots [0, n_slots) of src into dst: K and V of every layer and
  // their positions; dst's other slots keep their bytes.
  virtual void copy_slots(int32_t dst, int32_t src, int n_slots) = 0;
  // Copies slots [src_slot, src_slot + n) of src to [dst_slot, dst_slot + n) of dst
  // (K, V, positions).
  virtual void copy_range(int32_t dst, int dst_slot, int32_t src, int src_slot, int n) = 0;
  // copy_range with the keys rotated on the way, layer l's by rot[l] (rot: [n_layer];
  // kernels/k_relocate.h): the bytes decoding them, running Rope::apply and storing
  // them back would leave (RoPE relocation). V and positions are copied unchanged.
  virtual void copy_range_rotated(int32_t dst, int dst_slot, int32_t src, int src_slot, int n,
                                  const KeyRotation* rot) = 0;

  // Runs op over the keys of slots [first, end) of `page`, once per layer and
  // KV head, and keeps the result (RoPE relocation); the other slots keep their
  // bytes. Positions are untouched.
  virtual void update_keys(int32_t page, int first, int end, KeyRowsOp& op) = 0;

  // The page's serialized bytes (the layout above, bytes_per_page() of them)
  // into out, keeping slots [0, n_slots) and zeros elsewhere, so equal KV gives
  // equal bytes. Positions are not part of the bytes.
  virtual void read_page(int32_t page, int n_slots, uint8_t* out) const = 0;
  // Sets the whole page from serialized bytes (bytes_per_page() of them).
  virtual void write_page(int32_t page, const uint8_t* bytes) = 0;

 protected:
  KvPageStore(KvShape shape, int32_t n_pages);

 private:
  KvShape shape_;
  int32_t n_pages_;
  std::vector<int32_t> pos_;  // [n_pages][page_size]
};

}  // namespace pc
