// Tests of the host KV page store (kv/kv_storage.h) through the KvPageStore
// operations: each one places exactly the bytes the page layout says, checked
// against the host views k()/v() and k_index().
#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

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
  std::vector<uint16_t> k(n * stride), v(n * stride);
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h) {
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < hd; ++d) k[t * stride + d] = value(t, l, h, d, 0), v[t * stride + d] = value(t, l, h, d, 1);
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
  const uint16_t k[] = {1, 2, 3, 4, 5, 6}, v[] = {7, 8, 9, 10, 11, 12};
  s.write_slots(1, 0, slots, k, v, 3);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(key_at(s, 0, 1, 0, 5, d), k[3 + d]);
    EXPECT_EQ(value_at(s, 0, 1, 0, 5, d), v[3 + d]);
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

// Adds 1 to every element it sees and counts the rows.
struct AddOne final : KeyRowsOp {
  int calls = 0, rows = 0;
  void apply(int, uint16_t* r, int n) override {
    ++calls;
    rows += n;
    for (int i = 0; i < n * kShape.head_dim; ++i) ++r[i];
  }
};

TEST(KvStorage, UpdateKeysRunsOverEachLayerAndHeadsKeysOnly) {
  KvStorage s(kShape, 1);
  write_pattern(s, 0, 12);
  for (int t = 0; t < 12; ++t) s.pos(0)[t] = t;
  AddOne op;
  s.update_keys(0, 10, op);
  EXPECT_EQ(op.calls, kShape.n_layer * kShape.n_kv_head);
  EXPECT_EQ(op.rows, 10 * kShape.n_layer * kShape.n_kv_head);
  for (int l = 0; l < kShape.n_layer; ++l)
    for (int h = 0; h < kShape.n_kv_head; ++h)
      for (int t = 0; t < kShape.page_size; ++t)
        for (int d = 0; d < kShape.head_dim; ++d) {
          EXPECT_EQ(key_at(s, 0, l, h, t, d), value(t, l, h, d, 0) + (t < 10 ? 1 : 0));
          EXPECT_EQ(value_at(s, 0, l, h, t, d), value(t, l, h, d, 1));
        }
  for (int t = 0; t < 12; ++t) EXPECT_EQ(s.pos(0)[t], t);
}

}  // namespace
}  // namespace pc
