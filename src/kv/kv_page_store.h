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
// form (read_page / write_page, the payload of a tier entry) is, all F16:
//
//   page ─┬─ layer 0 ─┬─ K [n_kv_head][page_size × head_dim]   after RoPE, kernels/k_layout.h
//         │           └─ V [n_kv_head][page_size][head_dim]    slot-major
//         ├─ layer 1 ...
//         └─ layer L-1                                          bytes_per_page() in all
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

// One token slot: slot `slot` of page `page`.
struct KvSlot {
  int32_t page = -1;
  int32_t slot = 0;
};

// An operation on the keys of one KV head of one layer of a page, given as F16
// rows: rows[s * head_dim + d] is dimension d of slot s, s in [0, n_rows).
// The store gathers the rows, calls apply() with their layer and stores what it
// left there.
class KeyRowsOp {
 public:
  virtual void apply(int layer, uint16_t* rows, int n_rows) = 0;

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
  // (k_out[i], v_out[i]; each [n_kv_head][page_size × head_dim] F16, K laid out
  // by kernels/k_layout.h). Valid until the pages are written again.
  virtual void layer_blocks(int layer, std::span<const int32_t> pages, const uint16_t** k_out,
                            const uint16_t** v_out) const = 0;

  // Writes the K and V of one KV head of `layer` for tokens into their slots:
  // token i's key is k16[i * stride, + head_dim), its value v16[i * stride, +
  // head_dim), F16 already rounded, going to slots[i]. In span order, so of
  // two tokens naming one slot the last wins. Calls for different KV heads
  // touch disjoint bytes and may run concurrently.
  virtual void write_slots(int layer, int kv_head, std::span<const KvSlot> slots, const uint16_t* k16,
                           const uint16_t* v16, size_t stride) = 0;

  // Copies slots [0, n_slots) of src into dst: K and V of every layer and
  // their positions; dst's other slots keep their bytes.
  virtual void copy_slots(int32_t dst, int32_t src, int n_slots) = 0;
  // Copies slots [src_slot, src_slot + n) of src to [dst_slot, dst_slot + n) of dst
  // (K, V, positions).
  virtual void copy_range(int32_t dst, int dst_slot, int32_t src, int src_slot, int n) = 0;

  // Runs op over the keys of slots [0, n_slots) of `page`, once per layer and
  // KV head, and keeps the result (RoPE relocation). Positions are untouched.
  virtual void update_keys(int32_t page, int n_slots, KeyRowsOp& op) = 0;

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
