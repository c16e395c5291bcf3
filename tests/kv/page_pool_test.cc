#include "kv/page_pool.h"

#include <gtest/gtest.h>

#include "kv/radix_index.h"
#include "kv_fixture.h"

namespace pc {
namespace {

using test::tiny_shape;

TEST(PagePool, AllocatesInOrderAndCounts) {
  PagePool pool(tiny_shape(), 4);
  EXPECT_EQ(pool.page_bytes(), 16u);
  EXPECT_EQ(pool.alloc(), 0);
  EXPECT_EQ(pool.alloc(), 1);
  EXPECT_EQ(pool.n_in_use(), 2);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_EQ(pool.bytes_in_use(), 32u);
  pool.unref(0);  // a released page is reused before the never-used ones
  EXPECT_EQ(pool.alloc(), 0);
  EXPECT_EQ(pool.alloc(), 2);
  pool.unref(1);
  pool.unref(0);  // the last released first
  EXPECT_EQ(pool.alloc(), 0);
  EXPECT_EQ(pool.alloc(), 1);
  EXPECT_EQ(pool.alloc(), 3);
  EXPECT_EQ(pool.alloc(), -1);  // nothing free, no reclaimer
  pool.check_invariants();
}

TEST(PagePool, StatesFollowBothReferenceCounts) {
  PagePool pool(tiny_shape(), 3);
  const int32_t p = pool.alloc();
  pool.ref_cache(p);  // in use and cached
  EXPECT_EQ(pool.refcount(p), 2);
  EXPECT_EQ(pool.n_in_use(), 1);
  EXPECT_EQ(pool.n_cache_held(), 1);
  pool.unref(p);  // only the cache holds it
  EXPECT_EQ(pool.n_in_use(), 0);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_FALSE(pool.is_free(p));
  pool.ref(p);  // a sequence takes it again (cache hit)
  EXPECT_EQ(pool.n_in_use(), 1);
  EXPECT_EQ(pool.n_cached(), 0);
  pool.unref(p);
  EXPECT_TRUE(pool.unref_cache(p));
  EXPECT_TRUE(pool.is_free(p));
  EXPECT_EQ(pool.n_free(), 3);
  pool.check_invariants();
}

TEST(PagePool, MisuseIsRejected) {
  PagePool pool(tiny_shape(), 2);
  EXPECT_THROW(pool.ref(0), std::logic_error);    // free page
  EXPECT_THROW(pool.unref(0), std::logic_error);  // no reference
  EXPECT_THROW(pool.unref_cache(1), std::logic_error);
  EXPECT_THROW(pool.ref(7), std::logic_error);  // out of range
  const int32_t p = pool.alloc();
  pool.set_fill(p, 3);
  EXPECT_THROW(pool.set_fill(p, 2), std::logic_error);  // fill only grows
  EXPECT_THROW(pool.set_fill(p, 5), std::logic_error);  // beyond the page
  pool.check_invariants();
}

struct CountingReclaimer : PageReclaimer {
  PagePool* pool = nullptr;
  std::vector<int32_t> cached;  // pages it holds, oldest first
  int calls = 0;
  size_t reclaim(size_t bytes) override {
    ++calls;
    size_t freed = 0;
    while (freed < bytes && !cached.empty()) {
      if (pool->unref_cache(cached.front())) freed += pool->page_bytes();
      cached.erase(cached.begin());
    }
    return freed;
  }
};

TEST(PagePool, AllocAsksTheReclaimerOnlyWhenNothingIsFree) {
  PagePool pool(tiny_shape(), 2);
  CountingReclaimer r;
  r.pool = &pool;
  pool.set_reclaimer(&r);
  for (int i = 0; i < 2; ++i) {
    const int32_t p = pool.alloc();
    pool.ref_cache(p);
    pool.unref(p);
    r.cached.push_back(p);
  }
  EXPECT_EQ(pool.n_cached(), 2);
  EXPECT_EQ(pool.alloc(), 0);  // reclaims the oldest cached page
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.alloc(), 1);
  EXPECT_EQ(pool.alloc(), -1);  // reclaimer has nothing left
  EXPECT_EQ(r.calls, 3);
  pool.check_invariants();
}

TEST(PagePool, PagesForBytes) {
  const KvShape smollm{30, 3, 64, 16};
  EXPECT_EQ(smollm.bytes_per_page(), 368640u);
  EXPECT_EQ(PagePool::pages_for_bytes(smollm, 4ull << 30), int32_t((4ull << 30) / 368640));
  EXPECT_EQ(PagePool::pages_for_bytes(smollm, 368639), 0);
}

// Bytes per cached token are exactly the KV (2 × layers × KV heads × head dim × 2
// bytes for F16); descriptors and index metadata stay under 2% of the page bytes.
TEST(PagePool, MemoryPerCachedTokenForSmollm) {
  const KvShape smollm{30, 3, 64, 16};
  EXPECT_EQ(smollm.bytes_per_token(), size_t(2 * 30 * 3 * 64 * 2));
  EXPECT_LT(double(PagePool::kDescriptorBytes) / double(smollm.bytes_per_page()), 0.02);

  PagePool pool(smollm, 64);
  RadixIndex index(pool);
  pool.set_reclaimer(&index);
  const KvNamespace ns{"smollm-135m", "f16", ""};
  const auto tokens = test::range(1, 160);
  ASSERT_EQ(test::run(index, pool, ns, tokens), 0);
  const RadixStats s = index.stats();
  EXPECT_EQ(s.tokens, 160);
  EXPECT_EQ(size_t(s.bytes), 10 * smollm.bytes_per_page());
  EXPECT_EQ(size_t(s.bytes) / 160, size_t(2 * 30 * 3 * 64 * 2));
  EXPECT_EQ(pool.bytes_cached(), size_t(s.bytes));
  const double overhead =
      double(PagePool::kDescriptorBytes * pool.n_pages() + index.metadata_bytes()) / double(s.bytes);
  EXPECT_LT(overhead, 0.02);
}

}  // namespace
}  // namespace pc
