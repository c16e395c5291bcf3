#include "kv/page_table.h"

#include <gtest/gtest.h>

#include "kv_fixture.h"

namespace pc {
namespace {

using test::tiny_shape;

// A small real storage: 2 layers, 2 KV heads, head dim 3, page size 4.
const KvShape kSmall{2, 2, 3, 4};

// A recognisable value for (token position, layer, head, dim, K or V).
uint16_t kv_value(int32_t pos, int l, int h, int d, int kv) {
  return uint16_t(1 + pos * 97 + l * 31 + h * 7 + d * 3 + kv);
}

void write_slot(KvStorage& s, SlotRef r, int32_t pos) {
  const KvShape& sh = s.shape();
  for (int l = 0; l < sh.n_layer; ++l) {
    for (int h = 0; h < sh.n_kv_head; ++h) {
      for (int d = 0; d < sh.head_dim; ++d) {
        const size_t slab = size_t(h) * sh.page_size * sh.head_dim;
        s.k(r.page, l)[slab + k_index(sh.page_size, sh.head_dim, r.slot, d)] = kv_value(pos, l, h, d, 0);
        s.v(r.page, l)[slab + size_t(r.slot) * sh.head_dim + d] = kv_value(pos, l, h, d, 1);
      }
    }
  }
  s.pos(r.page)[r.slot] = pos;
}

// True when (page, slot) holds exactly what write_slot wrote for `pos`.
bool slot_holds(const KvStorage& s, int32_t page, int32_t slot, int32_t pos) {
  const KvShape& sh = s.shape();
  if (s.pos(page)[slot] != pos) return false;
  for (int l = 0; l < sh.n_layer; ++l) {
    for (int h = 0; h < sh.n_kv_head; ++h) {
      for (int d = 0; d < sh.head_dim; ++d) {
        const size_t slab = size_t(h) * sh.page_size * sh.head_dim;
        if (s.k(page, l)[slab + k_index(sh.page_size, sh.head_dim, slot, d)] != kv_value(pos, l, h, d, 0)) return false;
        if (s.v(page, l)[slab + size_t(slot) * sh.head_dim + d] != kv_value(pos, l, h, d, 1)) return false;
      }
    }
  }
  return true;
}

void append_and_write(KvStorage& s, PageTable& t, int32_t n) {
  const int32_t first = t.n_tokens();
  ASSERT_TRUE(t.prepare_append(n));
  for (int32_t i = 0; i < n; ++i) write_slot(s, t.appended()[i], first + i);
}

TEST(PageTable, AppendFillsPagesInOrder) {
  PagePool pool(tiny_shape(), 8);
  PageTable t(pool);
  ASSERT_TRUE(t.prepare_append(6));
  EXPECT_EQ(t.n_tokens(), 6);
  EXPECT_EQ(std::vector<PageEntry>(t.entries().begin(), t.entries().end()),
            (std::vector<PageEntry>{{0, 4}, {1, 2}}));
  EXPECT_EQ(std::vector<SlotRef>(t.appended().begin(), t.appended().end()),
            (std::vector<SlotRef>{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0}, {1, 1}}));
  ASSERT_TRUE(t.prepare_append(3));  // exclusive partial page: in place
  EXPECT_EQ(std::vector<SlotRef>(t.appended().begin(), t.appended().end()),
            (std::vector<SlotRef>{{1, 2}, {1, 3}, {2, 0}}));
  EXPECT_EQ(pool.fill(1), 4);
  EXPECT_EQ(pool.fill(2), 1);
  EXPECT_EQ(pool.n_in_use(), 3);
  t.release();
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_EQ(t.n_tokens(), 0);
  pool.check_invariants();
}

TEST(PageTable, SharedPartialPageIsCopiedOnWrite) {
  KvStorage storage(kSmall, 8);
  PagePool pool(storage);
  PageTable a(pool);
  append_and_write(storage, a, 6);  // (0,4) (1,2)
  PageTable b = a.share();
  EXPECT_EQ(pool.seq_refs(0), 2);
  EXPECT_EQ(pool.seq_refs(1), 2);

  append_and_write(storage, b, 1);  // page 1 is shared: b copies slots 0-1 to page 2
  EXPECT_EQ(std::vector<PageEntry>(b.entries().begin(), b.entries().end()),
            (std::vector<PageEntry>{{0, 4}, {2, 3}}));
  EXPECT_EQ(b.appended()[0], (SlotRef{2, 2}));
  EXPECT_TRUE(slot_holds(storage, 2, 0, 4));  // the copy equals the source slots
  EXPECT_TRUE(slot_holds(storage, 2, 1, 5));
  EXPECT_EQ(pool.seq_refs(1), 1);
  EXPECT_EQ(pool.seq_refs(2), 1);

  append_and_write(storage, a, 1);  // page 1 is a's alone again: in place
  EXPECT_EQ(a.appended()[0], (SlotRef{1, 2}));
  EXPECT_EQ(pool.n_in_use(), 3);
  // Both sequences read their own token 6 and the shared tokens 0-5.
  for (int32_t t = 0; t < 4; ++t) EXPECT_TRUE(slot_holds(storage, 0, t, t));
  EXPECT_TRUE(slot_holds(storage, 1, 2, 6));
  EXPECT_TRUE(slot_holds(storage, 2, 2, 6));
  a.release();
  b.release();
  EXPECT_EQ(pool.n_free(), 8);
  pool.check_invariants();
}

TEST(PageTable, ReadOnlyPartialPageIsCopiedOnWrite) {
  // A table over the first 5 of 6 written slots (a prefix hit ending mid-page): the
  // page's slot 1 holds another token, so the append must not go there.
  KvStorage storage(kSmall, 8);
  PagePool pool(storage);
  PageTable a(pool);
  append_and_write(storage, a, 6);
  const PageSlice slices[] = {{0, 0, 4}, {1, 0, 1}};
  PageTable b = PageTable::from_slices(pool, slices);
  a.release();  // b is now the only sequence holder of page 1, still fill 2 > 1
  EXPECT_EQ(pool.seq_refs(1), 1);
  append_and_write(storage, b, 2);
  EXPECT_EQ(std::vector<PageEntry>(b.entries().begin(), b.entries().end()),
            (std::vector<PageEntry>{{0, 4}, {2, 3}}));
  EXPECT_TRUE(slot_holds(storage, 2, 0, 4));
  EXPECT_TRUE(slot_holds(storage, 1, 1, 5));  // the source is untouched
  EXPECT_EQ(pool.n_free(), 6);                // page 1 went back to the pool
  pool.check_invariants();
}

TEST(PageTable, FromSlicesCollapsesSlicesOfOnePage) {
  PagePool pool(tiny_shape(), 8);
  PageTable w(pool);
  ASSERT_TRUE(w.prepare_append(12));  // pages 0 1 2 full
  // Same page continued; then a later page that continues the previous one (its
  // slots [0, 2) hold the same tokens, e.g. a copy-on-write copy).
  const PageSlice slices[] = {{0, 0, 2}, {0, 2, 4}, {1, 0, 2}, {2, 2, 3}};
  PageTable t = PageTable::from_slices(pool, slices);
  EXPECT_EQ(t.n_tokens(), 7);
  EXPECT_EQ(std::vector<PageEntry>(t.entries().begin(), t.entries().end()),
            (std::vector<PageEntry>{{0, 4}, {2, 3}}));
  EXPECT_EQ(pool.seq_refs(1), 1);  // page 1 is not referenced by t
  EXPECT_EQ(pool.seq_refs(2), 2);
  const PageSlice gap[] = {{0, 0, 2}, {1, 3, 4}};
  EXPECT_THROW(PageTable::from_slices(pool, gap), std::logic_error);
  pool.check_invariants();
}

TEST(PageTable, FailedAppendLeavesTableUnchanged) {
  PagePool pool(tiny_shape(), 3);
  PageTable a(pool), b(pool);
  ASSERT_TRUE(a.prepare_append(8));
  ASSERT_TRUE(b.prepare_append(1));  // page 2
  EXPECT_FALSE(b.prepare_append(4));  // needs a second page: none
  EXPECT_EQ(b.n_tokens(), 1);
  EXPECT_EQ(b.entries().size(), 1u);
  EXPECT_TRUE(b.appended().empty());
  PageTable c(pool);
  EXPECT_FALSE(c.prepare_append(1));
  EXPECT_EQ(pool.n_free(), 0);
  a.release();
  EXPECT_TRUE(b.prepare_append(4));
  pool.check_invariants();
}

TEST(PageTable, MoveTransfersReferences) {
  PagePool pool(tiny_shape(), 4);
  PageTable a(pool);
  ASSERT_TRUE(a.prepare_append(5));
  PageTable b = std::move(a);
  EXPECT_EQ(b.n_tokens(), 5);
  EXPECT_EQ(pool.n_in_use(), 2);
  {
    PageTable c(pool);
    c = std::move(b);
  }  // destructor releases
  EXPECT_EQ(pool.n_free(), 4);
  pool.check_invariants();
}

}  // namespace
}  // namespace pc
