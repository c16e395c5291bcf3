// Tests of the host KV page store (kv/kv_storage.h) through the KvPageStore
// operations: each one places exactly the bytes the page layout says, checked
// against the host views k()/v() and k_index().
#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "gguf/quants.h"
#include "kernels/elementwise.h"

namespace pc {
namespace {

// 2 layers, 2 KV heads, head dim 3, page size 12: the last block of keys is
// 4 slots wide (kernels/k_layout.h).
const KvShape kShape{2, 2, 3, 12};

// A recognisable F16 bit pattern for (slot, layer, head, dim, K or V).
uint16_t value(int slot, int l, int h, int d, int kv) { return uint16_t(1 + slot * 97 + l * 31 + h * 7 + d * 3 + kv); }

// Writes `value` into slots [0, n) of `page` with write_slots, one call per
// layer and head, rows of stride 5 (not the head size) to test the stride.
void write_pattern(KvPageStore& s, int32_t page, int n) {
  const int hd = kShape.head_dim;
  const size_t stride = 5;
  std::vector<KvSlot> slots;
  for (int t = 0; t < n; ++t) slots.push_back({page, t});
  std::vector<float> k(n * stride), v(n * stride);  // (F16 values: stored exactly)
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h) {
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < hd; ++d)
          k[t * stride + d] = fp16_to_fp32(value(t, l, h, d, 0)), v[t * stride + d] = fp16_to_fp32(value(t, l, h, d, 1));
      s.write_slots(l, h, slots, k.data(), v.data(), stride);
    }
}

uint16_t key_at(const KvStorage& s, int32_t page, int l, int h, int t, int d) {
  return s.k(page, l)[size_t(h) * kShape.page_size * kShape.head_dim + k_index(kShape.page_size, kShape.head_dim, t, d)];
}
uint16_t value_at(const KvStorage& s, int32_t page, int l, int h, int t, int d) {
  return s.v(page, l)[(size_t(h) * kShape.page_size + t) * kShape.head_dim + d];
}

TEST(KvStorage, WriteSlotsPlacesKeysAndValuesByTheLayout) {
  KvStorage s(kShape, 3);
  write_pattern(s, 1, 10);
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h)
      for (int t = 0; t < kShape.page_size; ++t)
        for (int d = 0; d < kShape.head_dim; ++d) {
          EXPECT_EQ(key_at(s, 1, l, h, t, d), t < 10 ? value(t, l, h, d, 0) : 0) << l << h << t << d;
          EXPECT_EQ(value_at(s, 1, l, h, t, d), t < 10 ? value(t, l, h, d, 1) : 0) << l << h << t << d;
        }
  // Pages 0 and 2 are untouched.
  std::vector<uint8_t> page(kShape.bytes_per_page()), zero(kShape.bytes_per_page(), 0);
  s.read_page(0, kShape.page_size, page.data());
  EXPECT_EQ(page, zero);
  s.read_page(2, kShape.page_size, page.data());
  EXPECT_EQ(page, zero);
}

TEST(KvStorage, WriteSlotsLastOfTwoWritesOfOneSlotWins) {
  KvStorage s(kShape, 1);
  const std::vector<KvSlot> slots = {{0, 5}, {0, 5}};
  const float k[] = {1, 2, 3, 4, 5, 6}, v[] = {7, 8, 9, 10, 11, 12};
  s.write_slots(1, 0, slots, k, v, 3);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(key_at(s, 0, 1, 0, 5, d), fp32_to_fp16(k[3 + d]));
    EXPECT_EQ(value_at(s, 0, 1, 0, 5, d), fp32_to_fp16(v[3 + d]));
  }
}

TEST(KvStorage, LayerBlocksAreThePagesBlocks) {
  KvStorage s(kShape, 4);
  const std::vector<int32_t> pages = {3, 0, 2};
  std::vector<const uint16_t*> k(3), v(3);
  s.layer_blocks(1, pages, k.data(), v.data());
  for (size_t i = 0; i < pages.size(); ++i) {
    EXPECT_EQ(k[i], s.k(pages[i], 1));
    EXPECT_EQ(v[i], s.v(pages[i], 1));
  }
}

TEST(KvStorage, ReadPageKeepsTheFirstSlotsAndZerosTheRest) {
  KvStorage s(kShape, 2);
  write_pattern(s, 0, 12);
  for (int n : {1, 7, 8, 9, 12}) {
    std::vector<uint8_t> bytes(kShape.bytes_per_page());
    s.read_page(0, n, bytes.data());
    s.write_page(1, bytes.data());
    for (int l = 0; l < kShape.n_layer; ++l)
      for (int h = 0; h < kShape.n_kv_head; ++h)
        for (int t = 0; t < kShape.page_size; ++t)
          for (int d = 0; d < kShape.head_dim; ++d) {
            EXPECT_EQ(key_at(s, 1, l, h, t, d), t < n ? value(t, l, h, d, 0) : 0) << n;
            EXPECT_EQ(value_at(s, 1, l, h, t, d), t < n ? value(t, l, h, d, 1) : 0) << n;
          }
  }
  // A full page reads as its memory, byte for byte.
  std::vector<uint8_t> bytes(kShape.bytes_per_page());
  s.read_page(0, kShape.page_size, bytes.data());
  EXPECT_EQ(std::memcmp(bytes.data(), s.k(0, 0), bytes.size()), 0);
}

TEST(KvStorage, CopySlotsCopiesKvAndPositionsOfTheFirstSlots) {
  KvStorage s(kShape, 2);
  write_pattern(s, 0, 12);
  for (int t = 0; t < 12; ++t) s.pos(0)[t] = 100 + t;
  s.copy_slots(1, 0, 9);
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h)
      for (int t = 0; t < kShape.page_size; ++t)
        for (int d = 0; d < kShape.head_dim; ++d) {
          EXPECT_EQ(key_at(s, 1, l, h, t, d), t < 9 ? value(t, l, h, d, 0) : 0);
          EXPECT_EQ(value_at(s, 1, l, h, t, d), t < 9 ? value(t, l, h, d, 1) : 0);
        }
  for (int t = 0; t < kShape.page_size; ++t) EXPECT_EQ(s.pos(1)[t], t < 9 ? 100 + t : -1);
}

// Adds 1 to the F16 bits of every element it sees and counts the rows.
struct AddOne final : KeyRowsOp {
  int calls = 0, rows = 0;
  void apply(int, float* r, int n) override {
    ++calls;
    rows += n;
    for (int i = 0; i < n * kShape.head_dim; ++i) r[i] = fp16_to_fp32(uint16_t(fp32_to_fp16(r[i]) + 1));
  }
};

TEST(KvStorage, UpdateKeysRunsOverEachLayerAndHeadsKeysOnly) {
  KvStorage s(kShape, 1);
  write_pattern(s, 0, 12);
  for (int t = 0; t < 12; ++t) s.pos(0)[t] = t;
  AddOne op;
  s.update_keys(0, 2, 10, op);  // slots [2, 10)
  EXPECT_EQ(op.calls, kShape.n_layer * kShape.n_kv_head);
  EXPECT_EQ(op.rows, 8 * kShape.n_layer * kShape.n_kv_head);
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h)
      for (int t = 0; t < kShape.page_size; ++t)
        for (int d = 0; d < kShape.head_dim; ++d) {
          EXPECT_EQ(key_at(s, 0, l, h, t, d), value(t, l, h, d, 0) + (t >= 2 && t < 10 ? 1 : 0));
          EXPECT_EQ(value_at(s, 0, l, h, t, d), value(t, l, h, d, 1));
        }
  for (int t = 0; t < 12; ++t) EXPECT_EQ(s.pos(0)[t], t);
}

// The quantized types: slot-major rows of K and V (kernels/kv_quant.h), each row
// quantized from its own values. 2 layers, 2 KV heads of 32 dimensions, page 12.
struct QuantizedStore {
  KvShape shape;
  KvStorage s;
  std::vector<float> rows;  // [page][layer][head][slot][K, V][hd] the values written
  explicit QuantizedStore(KvType t, int n_pages = 3) : shape{2, 2, 32, 12, t}, s(shape, n_pages) {
    rows.resize(size_t(n_pages) * 2 * 2 * 12 * 2 * 32);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : rows) x = nd(rng);
  }
  const float* row(int page, int l, int h, int slot, int kv) const {
    return rows.data() + ((((size_t(page) * 2 + l) * 2 + h) * 12 + slot) * 2 + kv) * 32;
  }
  void write(int page, int n) {
    std::vector<KvSlot> slots;
    for (int t = 0; t < n; ++t) slots.push_back({page, t});
    std::vector<float> k(size_t(n) * 32), v(size_t(n) * 32);
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h) {
        for (int t = 0; t < n; ++t) {
          std::memcpy(k.data() + t * 32, row(page, l, h, t, 0), 32 * 4);
          std::memcpy(v.data() + t * 32, row(page, l, h, t, 1), 32 * 4);
        }
        s.write_slots(l, h, slots, k.data(), v.data(), 32);
      }
  }
  // Slot `slot` of `page` decodes to the quantized round trip of what (src_page, src_slot) was given.
  void expect_slot(int page, int slot, int src_page, int src_slot, const char* what) const {
    std::vector<float> k(64), v(64), want(32);
    std::vector<uint8_t> q(shape.row_bytes());
    for (int l = 0; l < 2; ++l) {
      s.read_slot(l, page, slot, k.data(), v.data());
      for (int h = 0; h < 2; ++h)
        for (int kv = 0; kv < 2; ++kv) {
          kv_quantize_row(shape.kv_type, row(src_page, l, h, src_slot, kv), 32, q.data());
          kv_dequantize_row(shape.kv_type, q.data(), 32, want.data());
          ASSERT_EQ(0, std::memcmp(want.data(), (kv ? v : k).data() + h * 32, 32 * 4))
              << what << " " << kv_type_name(shape.kv_type) << " l=" << l << " h=" << h << " slot=" << slot;
        }
    }
  }
};

TEST(KvStorage, QuantizedPagesHoldTheRealBytes) {
  EXPECT_EQ((KvShape{2, 2, 32, 12, KvType::kQ8_0}.bytes_per_page()), size_t(2 * 2 * 2 * 12 * 34));
  EXPECT_EQ((KvShape{2, 2, 32, 12, KvType::kQ4_0}.bytes_per_page()), size_t(2 * 2 * 2 * 12 * 18));
  EXPECT_EQ((KvShape{2, 2, 32, 12, KvType::kF16}.bytes_per_page()), size_t(2 * 2 * 2 * 12 * 64));
  EXPECT_THROW(KvStorage(KvShape{1, 1, 20, 16, KvType::kQ8_0}, 1), std::exception);  // 20 dims: no blocks
}

TEST(KvStorage, QuantizedWriteReadCopyAndSerialize) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    QuantizedStore q(t);
    q.write(0, 12);
    for (int slot = 0; slot < 12; ++slot) q.expect_slot(0, slot, 0, slot, "write");
    // Copy-on-write and relocation copies move rows unchanged.
    q.s.copy_slots(1, 0, 7);
    for (int slot = 0; slot < 7; ++slot) q.expect_slot(1, slot, 0, slot, "copy_slots");
    q.s.copy_range(2, 3, 0, 5, 4);
    for (int i = 0; i < 4; ++i) q.expect_slot(2, 3 + i, 0, 5 + i, "copy_range");
    // The serialized page keeps the first n slots, zeros the rest, and reads back.
    for (int n : {1, 9, 12}) {
      std::vector<uint8_t> bytes(q.shape.bytes_per_page()), again(bytes.size());
      q.s.read_page(0, n, bytes.data());
      q.s.write_page(2, bytes.data());
      for (int slot = 0; slot < n; ++slot) q.expect_slot(2, slot, 0, slot, "write_page");
      std::vector<float> k(64), v(64);
      for (int slot = n; slot < 12; ++slot) {
        q.s.read_slot(1, 2, slot, k.data(), v.data());
        for (int i = 0; i < 64; ++i) ASSERT_EQ(k[i], 0.f) << n;
      }
      q.s.read_page(2, n, again.data());
      EXPECT_EQ(bytes, again);
    }
  }
}

// update_keys hands the op the decoded rows and requantizes what it leaves there;
// values are untouched.
struct Scale2 final : KeyRowsOp {
  void apply(int, float* r, int n) override {
    for (int i = 0; i < n * 32; ++i) r[i] *= 2.f;
  }
};

TEST(KvStorage, QuantizedUpdateKeysRequantizesEachRow) {
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    QuantizedStore q(t);
    q.write(0, 12);
    std::vector<float> before(64 * 12 * 2), vbefore(64 * 12 * 2), after(64), v(64);
    for (int l = 0; l < 2; ++l)
      for (int slot = 0; slot < 12; ++slot)
        q.s.read_slot(l, 0, slot, before.data() + (l * 12 + slot) * 64, vbefore.data() + (l * 12 + slot) * 64);
    Scale2 op;
    q.s.update_keys(0, 2, 10, op);
    for (int l = 0; l < 2; ++l)
      for (int slot = 0; slot < 12; ++slot) {
        q.s.read_slot(l, 0, slot, after.data(), v.data());
        for (int i = 0; i < 64; ++i) {
          const float b = before[(l * 12 + slot) * 64 + i];
          ASSERT_EQ(after[i], slot >= 2 && slot < 10 ? 2 * b : b) << kv_type_name(t);  // (doubling a block is exact)
          ASSERT_EQ(v[i], vbefore[(l * 12 + slot) * 64 + i]) << kv_type_name(t);
        }
      }
  }
}


// Each layer's RoPE by a fixed shift (its own base, both pair layouts, n_rot below
// head_dim on odd layers), as a KeyRowsOp (the element-wise path: update_keys) and as
// the per-layer KeyRotation copy_range_rotated takes.
struct LayerRopes final : KeyRowsOp {
  int hd;
  std::vector<Rope> ropes;
  std::vector<std::vector<float>> cs;
  std::vector<KeyRotation> rot;
  LayerRopes(int n_layer, int head_dim, int32_t shift, bool neox) : hd(head_dim) {
    for (int l = 0; l < n_layer; ++l) {
      const int n_rot = l % 2 ? head_dim / 2 : head_dim;
      ropes.emplace_back(RopeParams{n_rot, 10000.f * float(l + 1), 1.f, neox});
      cs.emplace_back(size_t(n_rot));
      ropes.back().angles(shift, cs.back().data());
    }
    for (int l = 0; l < n_layer; ++l) rot.push_back({cs[size_t(l)].data(), int(ropes[size_t(l)].n_pairs()), neox});
  }
  void apply(int layer, float* rows, int n) override {
    for (int r = 0; r < n; ++r) ropes[size_t(layer)].apply(rows + size_t(r) * hd, cs[size_t(layer)].data());
  }
};

// copy_range_rotated leaves exactly the bytes of copy_range then update_keys with the
// same rotation (what relocation did in two passes), for every KV type, at unaligned
// slot ranges of pages whose last block is narrow; V, positions and the other slots
// untouched.
TEST(KvStorage, CopyRangeRotatedEqualsCopyThenUpdateKeys) {
  std::mt19937 rng(37);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (KvType t : {KvType::kF16, KvType::kQ8_0, KvType::kQ4_0})
    for (bool neox : {false, true}) {
      const KvShape shape{3, 2, 32, 20, t};
      KvStorage fused(shape, 4), twice(shape, 4);
      // Pages 0 and 1: random keys and values in every slot; pages 2 and 3 the targets,
      // filled too so that kept slots are visible.
      for (int32_t page = 0; page < 4; ++page) {
        std::vector<KvSlot> slots;
        for (int s = 0; s < shape.page_size; ++s) slots.push_back({page, s});
        std::vector<float> k(size_t(shape.page_size) * 32), v(k.size());
        for (int l = 0; l < shape.n_layer; ++l)
          for (int h = 0; h < shape.n_kv_head; ++h) {
            for (float& x : k) x = nd(rng);
            for (float& x : v) x = nd(rng);
            fused.write_slots(l, h, slots, k.data(), v.data(), 32);
            twice.write_slots(l, h, slots, k.data(), v.data(), 32);
          }
        for (int s = 0; s < shape.page_size; ++s) fused.pos(page)[s] = twice.pos(page)[s] = page * 100 + s;
      }
      for (int rep = 0; rep < 20; ++rep) {
        const int n = 1 + int(rng() % 20);
        const int ss = int(rng() % uint32_t(21 - n)), ds = int(rng() % uint32_t(21 - n));
        const int32_t src = int32_t(rng() % 2), dst = 2 + int32_t(rng() % 2);
        LayerRopes ropes(shape.n_layer, 32, int32_t(rng() % 3000) - 1500, neox);
        fused.copy_range_rotated(dst, ds, src, ss, n, ropes.rot.data());
        twice.copy_range(dst, ds, src, ss, n);
        twice.update_keys(dst, ds, ds + n, ropes);
        for (int32_t page = 0; page < 4; ++page) {
          std::vector<uint8_t> a(shape.bytes_per_page()), b(a.size());
          fused.read_page(page, shape.page_size, a.data());
          twice.read_page(page, shape.page_size, b.data());
          ASSERT_EQ(a, b) << kv_type_name(t) << (neox ? " neox" : "") << " page " << page << ": " << n << " slots "
                          << src << ":" << ss << " -> " << dst << ":" << ds;
          ASSERT_EQ(0, std::memcmp(fused.pos(page), twice.pos(page), shape.page_size * sizeof(int32_t)));
        }
      }
    }
}

}  // namespace
}  // namespace pc
