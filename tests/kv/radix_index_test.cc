// Exact tests of the radix index on tiny pools (page_size 4, 16 bytes per page):
// page ids, reference counts, split points, eviction order.
#include "kv/radix_index.h"

#include <gtest/gtest.h>

#include "kv_fixture.h"

namespace pc {
namespace {

using test::cat;
using test::range;
using test::seq;

std::vector<PageSlice> slices_of(const PrefixMatch& m) { return m.slices; }
std::vector<PageEntry> entries_of(const PageTable& t) {
  return {t.entries().begin(), t.entries().end()};
}
std::vector<SlotRef> appended_of(const PageTable& t) {
  return {t.appended().begin(), t.appended().end()};
}
std::vector<int32_t> tokens_of(const RadixIndex::NodeView& v) {
  return {v.tokens.begin(), v.tokens.end()};
}

class RadixIndexTest : public ::testing::Test {
 protected:
  explicit RadixIndexTest(int32_t n_pages = 11) : pool_(test::tiny_shape(), n_pages), index_(pool_) {
    pool_.set_reclaimer(&index_);
  }
  void TearDown() override {
    index_.check_invariants();
    test::expect_accounting_adds_up(pool_);
  }
  int32_t run(const std::vector<int32_t>& tokens) { return test::run(index_, pool_, ns_, tokens); }
  test::Request start(const std::vector<int32_t>& prompt) {
    return test::start(index_, pool_, ns_, prompt);
  }
  void finish(const std::vector<int32_t>& tokens, test::Request& r) {
    test::finish(index_, ns_, tokens, r);
  }
  int32_t match_len(const std::vector<int32_t>& tokens) { return match(tokens).length; }
  // A request's match: all but the last token may come from the cache.
  PrefixMatch match(const std::vector<int32_t>& tokens, const KvNamespace* ns = nullptr) {
    return index_.match_prefix(ns ? *ns : ns_, tokens, int32_t(tokens.size()) - 1);
  }

  PagePool pool_;
  RadixIndex index_;
  KvNamespace ns_{"smollm-135m", "f16", ""};
};

TEST_F(RadixIndexTest, InsertThenMatchSharesPages) {
  const auto a = range(1, 10);
  EXPECT_EQ(run(a), 0);
  EXPECT_EQ(pool_.n_cached(), 3);  // pages 0 1 2, kept after the sequence ended
  EXPECT_EQ(pool_.n_free(), 8);
  EXPECT_EQ(index_.stats().entries, 1);
  EXPECT_EQ(index_.stats().tokens, 10);
  EXPECT_EQ(index_.stats().bytes, 48);

  PrefixMatch m = match(cat(a, {11}));
  EXPECT_EQ(m.length, 10);
  EXPECT_EQ(slices_of(m), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 4}, {2, 0, 2}}));
  EXPECT_TRUE(index_.node(m.node).leaf);
  EXPECT_EQ(tokens_of(index_.node(m.node)), a);

  // The same query without a new token matches 9 and splits mid-page at 9.
  m = match(a);
  EXPECT_EQ(m.length, 9);
  EXPECT_EQ(slices_of(m), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 4}, {2, 0, 1}}));
  EXPECT_EQ(tokens_of(index_.node(m.node)), range(1, 9));
  EXPECT_FALSE(index_.node(m.node).leaf);
  EXPECT_EQ(index_.stats().entries, 2);
  EXPECT_EQ(pool_.cache_refs(2), 2);  // both halves reference page 2
  EXPECT_EQ(pool_.n_cached(), 3);
  const RadixStats s = index_.stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.hit_tokens, 19);
}

TEST_F(RadixIndexTest, MatchNeverCoversTheWholeQuery) {
  EXPECT_EQ(run(seq({1, 2, 3})), 0);
  EXPECT_EQ(match_len(seq({1, 2, 3})), 2);
  EXPECT_EQ(match_len(seq({1, 2, 3, 4})), 3);
  EXPECT_EQ(match_len(seq({1})), 0);
  EXPECT_EQ(match_len({}), 0);
  EXPECT_EQ(match_len(seq({2, 2, 3, 4})), 0);
}

// A hit ending mid-page shares the page; the first append copies the matched slots
// to a fresh page instead of overwriting slot 1, which still serves token 6.
TEST_F(RadixIndexTest, HitEndingMidPageCopiesOnWrite) {
  EXPECT_EQ(run(range(1, 6)), 0);  // pages 0 (4), 1 (2)
  const auto b = seq({1, 2, 3, 4, 5, 9, 9});
  test::Request r = start(b);
  EXPECT_EQ(r.match.length, 5);
  EXPECT_EQ(slices_of(r.match), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 1}}));
  EXPECT_EQ(pool_.cache_refs(1), 2);  // split [1..5] | [6] inside page 1
  EXPECT_EQ(entries_of(r.table), (std::vector<PageEntry>{{0, 4}, {1, 1}}));
  EXPECT_EQ(pool_.seq_refs(1), 1);

  ASSERT_TRUE(r.table.prepare_append(2));
  EXPECT_EQ(entries_of(r.table), (std::vector<PageEntry>{{0, 4}, {2, 3}}));
  EXPECT_EQ(appended_of(r.table), (std::vector<SlotRef>{{2, 1}, {2, 2}}));
  EXPECT_EQ(pool_.seq_refs(1), 0);
  EXPECT_EQ(pool_.fill(1), 2);  // untouched
  finish(b, r);

  // Tree: [1..5] -> { [6] in page 1 slot 1, [9 9] in page 2 slots 1-2 }.
  const PrefixMatch m = match(cat(b, {0}));
  EXPECT_EQ(m.length, 7);
  EXPECT_EQ(slices_of(m), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 1}, {2, 1, 3}}));
  const PageTable t = PageTable::from_slices(pool_, m.slices);
  EXPECT_EQ(entries_of(t), (std::vector<PageEntry>{{0, 4}, {2, 3}}));
  EXPECT_EQ(match_len(seq({1, 2, 3, 4, 5, 6, 0})), 6);
  EXPECT_EQ(pool_.n_cached(), 1);  // page 1; pages 0 and 2 are also held by t
  EXPECT_EQ(pool_.n_in_use(), 2);
}

// A chat turn that extends the previous turn's exact tokens appends into the cached
// partial page in place: the cache only covers slots below the fill.
TEST_F(RadixIndexTest, ContinuationAppendsInPlace) {
  EXPECT_EQ(run(range(1, 6)), 0);
  const auto b = range(1, 9);
  test::Request r = start(b);
  EXPECT_EQ(r.match.length, 6);
  ASSERT_TRUE(r.table.prepare_append(3));
  EXPECT_EQ(appended_of(r.table), (std::vector<SlotRef>{{1, 2}, {1, 3}, {2, 0}}));
  finish(b, r);
  const PrefixMatch m = match(range(1, 10));
  EXPECT_EQ(m.length, 9);
  EXPECT_EQ(slices_of(m), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 2}, {1, 2, 4}, {2, 0, 1}}));
  EXPECT_EQ(pool_.cache_refs(1), 2);
  EXPECT_EQ(pool_.n_cached(), 3);
}

// Two hits on one partial page: the first writer copies; the page is then the
// second's alone, with nothing written past its slots, so it appends in place.
TEST_F(RadixIndexTest, FirstWriterCopiesSecondAppendsInPlace) {
  EXPECT_EQ(run(range(1, 6)), 0);
  test::Request r1 = start(cat(range(1, 6), {7}));
  test::Request r2 = start(cat(range(1, 6), {8}));
  EXPECT_EQ(pool_.seq_refs(1), 2);
  ASSERT_TRUE(r1.table.prepare_append(1));
  ASSERT_TRUE(r2.table.prepare_append(1));
  EXPECT_EQ(appended_of(r1.table), (std::vector<SlotRef>{{2, 2}}));
  EXPECT_EQ(appended_of(r2.table), (std::vector<SlotRef>{{1, 2}}));
  EXPECT_EQ(pool_.seq_refs(1), 1);
  finish(cat(range(1, 6), {7}), r1);
  finish(cat(range(1, 6), {8}), r2);
  EXPECT_EQ(index_.stats().entries, 3);
}

// Tree after setup, oldest first:  [1..4] ─┬─ [5..8]  page 1   (A)
//                                           └─ [9 9 9 9] page 2 (B)
//                                  [20..24] pages 3, 4          (C)
class RadixEvictionTest : public RadixIndexTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(run(a_), 0);
    ASSERT_EQ(run(b_), 4);
    ASSERT_EQ(run(c_), 0);
    ASSERT_EQ(pool_.n_cached(), 5);
  }
  const std::vector<int32_t> a_ = range(1, 8);
  const std::vector<int32_t> b_ = seq({1, 2, 3, 4, 9, 9, 9, 9});
  const std::vector<int32_t> c_ = range(20, 24);
};

TEST_F(RadixEvictionTest, LeastRecentlyUsedLeavesFirst) {
  EXPECT_EQ(index_.evict(16), 16u);  // A's tail
  EXPECT_TRUE(pool_.is_free(1));
  EXPECT_EQ(index_.evict(16), 16u);  // B's tail; [1..4] becomes a leaf, used at B
  EXPECT_TRUE(pool_.is_free(2));
  EXPECT_EQ(index_.evict(16), 16u);  // [1..4], older than C
  EXPECT_TRUE(pool_.is_free(0));
  EXPECT_EQ(index_.evict(16), 32u);  // C: both its pages
  EXPECT_EQ(index_.evict(16), 0u);
  EXPECT_EQ(index_.stats().entries, 0);
  EXPECT_EQ(index_.stats().evicted, 4);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixEvictionTest, AHitRefreshesTheWholePath) {
  EXPECT_EQ(match_len(cat(a_, {0})), 8);  // A's path is now the most recent
  EXPECT_EQ(index_.evict(16), 16u);       // B
  EXPECT_TRUE(pool_.is_free(2));
  EXPECT_EQ(index_.evict(16), 32u);  // C
  EXPECT_EQ(index_.evict(16), 16u);  // A's tail
  EXPECT_TRUE(pool_.is_free(1));
  EXPECT_FALSE(pool_.is_free(0));
}

// The cache API's operations on one entry by its listing id.
TEST_F(RadixEvictionTest, OneEntryByIdGoesWithWhatOnlyItUsed) {
  int32_t a_tail = -1, b_tail = -1, c = -1;
  index_.for_each_leaf(ns_, [&](int32_t id) {
    const std::vector<int32_t> t = tokens_of(index_.node(id));
    if (t == range(5, 8)) a_tail = id;
    if (t == seq({9, 9, 9, 9})) b_tail = id;
    if (t == c_) c = id;
  });
  ASSERT_GE(a_tail, 0);
  ASSERT_GE(b_tail, 0);
  ASSERT_GE(c, 0);
  const int32_t shared = index_.node(a_tail).parent;  // [1..4], A's and B's
  EXPECT_TRUE(index_.is_entry(ns_, a_tail));
  EXPECT_FALSE(index_.is_entry(ns_, shared));  // not a leaf
  EXPECT_FALSE(index_.is_entry(KvNamespace{"smollm-135m", "f16", "other"}, a_tail));

  ASSERT_TRUE(index_.pin_entry(a_tail));
  EXPECT_EQ(index_.evict_entry(a_tail), 0u);
  EXPECT_EQ(index_.evict(16), 16u);  // LRU passes the pinned entry by: B's tail goes
  EXPECT_TRUE(index_.unpin_entry(a_tail));
  EXPECT_FALSE(index_.unpin_entry(a_tail));
  EXPECT_EQ(index_.evict_entry(a_tail), 32u);  // its tail and [1..4], no longer shared
  EXPECT_TRUE(pool_.is_free(0));
  EXPECT_TRUE(pool_.is_free(1));
  EXPECT_EQ(index_.namespaces().size(), 1u);
  // The namespace's last entry takes its tree with it.
  EXPECT_EQ(index_.evict_entry(c), 32u);
  EXPECT_TRUE(index_.namespaces().empty());
  EXPECT_EQ(index_.stats().entries, 0);
  EXPECT_EQ(pool_.n_free(), 11);
  index_.check_invariants();
}

TEST_F(RadixEvictionTest, LockedAndPinnedAreSkipped) {
  test::Request r = start(cat(a_, {99}));  // locks [1..4] and A's tail
  ASSERT_EQ(r.match.length, 8);
  EXPECT_EQ(index_.node(r.match.node).lock_ref, 1);
  ASSERT_TRUE(index_.pin(ns_, c_));
  EXPECT_EQ(index_.evict(1000), 16u);  // only B is evictable
  EXPECT_TRUE(pool_.is_free(2));
  EXPECT_EQ(index_.stats().entries, 3);

  r.table.release();
  index_.unlock(r.match.node);
  EXPECT_TRUE(index_.unpin(ns_, c_));
  EXPECT_FALSE(index_.unpin(ns_, c_));
  EXPECT_EQ(index_.evict(16), 32u);  // C is older than the hit on A
  EXPECT_EQ(index_.evict(16), 16u);  // A's tail
  EXPECT_TRUE(pool_.is_free(1));
  EXPECT_EQ(index_.evict(16), 16u);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixEvictionTest, ExpiredSubtreesGoFirst) {
  const auto now = RadixIndex::Clock::now();
  using std::chrono::seconds;
  EXPECT_FALSE(index_.set_expiry(ns_, seq({1, 2, 9}), now));  // not cached
  ASSERT_TRUE(index_.set_expiry(ns_, range(1, 4), now + seconds(10)));  // [1..4]: A's and B's prefix
  ASSERT_TRUE(index_.pin(ns_, b_));                                      // expiry beats a pin
  EXPECT_EQ(index_.evict_expired(now), 0u);
  EXPECT_EQ(index_.evict_expired(now + seconds(11)), 48u);  // pages 0 1 2
  EXPECT_EQ(index_.stats().entries, 1);                     // C
  EXPECT_EQ(index_.stats().evicted, 3);
  EXPECT_EQ(match_len(cat(a_, {0})), 0);
  EXPECT_EQ(match_len(cat(c_, {0})), 5);
  // No expiry left: evict() goes straight to LRU.
  EXPECT_EQ(index_.evict(16), 32u);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixEvictionTest, ExpiryWaitsForLocksAndSurvivesSplits) {
  const auto later = RadixIndex::Clock::now() + std::chrono::hours(1);
  ASSERT_TRUE(index_.set_expiry(ns_, a_, RadixIndex::Clock::now()));  // A's tail [5..8]
  test::Request r = start(cat(a_, {99}));  // locks A's path
  EXPECT_EQ(index_.evict_expired(later), 0u);
  r.table.release();
  index_.unlock(r.match.node);
  // A match ending inside the tail splits it; both halves keep the expiry.
  EXPECT_EQ(match_len(range(1, 6)), 5);
  EXPECT_EQ(index_.stats().entries, 5);
  EXPECT_EQ(index_.evict_expired(later), 16u);  // page 1 ([5..8])
  EXPECT_EQ(match_len(cat(a_, {0})), 4);         // [1..4] stays: B shares it
  EXPECT_EQ(index_.stats().entries, 3);
  // Clearing an expiry.
  ASSERT_TRUE(index_.set_expiry(ns_, c_, later));
  ASSERT_TRUE(index_.set_expiry(ns_, c_, RadixIndex::Clock::time_point::max()));
  EXPECT_EQ(index_.evict_expired(later + std::chrono::hours(1)), 0u);
}

// Lifetimes (retain): kept from LRU like a pin until they lapse, re-armed by use.
TEST_F(RadixEvictionTest, RetainedEntriesSurviveLruUntilTheyLapse) {
  using std::chrono::seconds;
  const auto now = RadixIndex::Clock::now();
  RadixIndex::Clock::time_point until;
  EXPECT_FALSE(index_.retain(ns_, seq({1, 2, 9}), seconds(10), now, &until));  // not cached
  ASSERT_TRUE(index_.retain(ns_, a_, seconds(60), now, &until));  // A, the oldest entry
  EXPECT_EQ(until, now + seconds(60));
  EXPECT_EQ(index_.stats().retained, 1);
  EXPECT_EQ(index_.stats().retained_pages, 2);  // A's whole prefix: pages 0 and 1
  EXPECT_EQ(index_.node(index_.anchor(ns_, a_).node).retain_until, now + seconds(60));
  // LRU pressure takes B and C but neither A's tail nor the [1..4] it extends.
  EXPECT_EQ(index_.evict(1000), 48u);
  EXPECT_TRUE(pool_.is_free(2));
  EXPECT_FALSE(pool_.is_free(0));
  EXPECT_FALSE(pool_.is_free(1));
  EXPECT_EQ(match_len(cat(a_, {0})), 8);
  EXPECT_EQ(index_.retained_prefix(ns_, cat(a_, {0})).tokens, 8);
  EXPECT_EQ(index_.retained_prefix(ns_, range(1, 4)).tokens, 0);  // only A's end is retained
  // Still within the lifetime nothing is released; past it, LRU takes A.
  index_.release_lapsed(now + seconds(30));
  EXPECT_EQ(index_.evict(1000), 0u);
  index_.release_lapsed(RadixIndex::Clock::now() + seconds(61));
  EXPECT_EQ(index_.stats().retained, 0);
  EXPECT_EQ(index_.stats().retained_pages, 0);
  EXPECT_EQ(index_.evict(1000), 32u);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixEvictionTest, AHitReArmsTheLifetime) {
  using std::chrono::seconds;
  const auto now = RadixIndex::Clock::now();
  RadixIndex::Clock::time_point until;
  // Granted 10 s ago for 15 s: 5 s left.
  ASSERT_TRUE(index_.retain(ns_, c_, seconds(15), now - seconds(10), &until));
  EXPECT_EQ(until, now + seconds(5));
  EXPECT_EQ(match_len(cat(c_, {0})), 5);  // a request through C re-arms it to 15 s from now
  const RadixIndex::Retained r = index_.retained_prefix(ns_, c_);
  EXPECT_EQ(r.tokens, 5);
  EXPECT_GE(r.until, now + seconds(15));
  index_.release_lapsed(now + seconds(10));  // the old end has passed; the new one has not
  EXPECT_EQ(index_.stats().retained, 1);
  EXPECT_EQ(index_.evict(1000), 48u);  // A's tail, B's, then [1..4]; C stays
  EXPECT_EQ(index_.stats().entries, 1);
  EXPECT_EQ(match_len(cat(c_, {0})), 5);
  // Asking again keeps the later end and the longer lifetime.
  ASSERT_TRUE(index_.retain(ns_, c_, seconds(1), now, &until));
  EXPECT_GE(until, now + seconds(15));
}

TEST_F(RadixEvictionTest, RetentionLimitRefusesAndAdminEvictionOverrides) {
  using std::chrono::seconds;
  const auto now = RadixIndex::Clock::now();
  RadixIndex::Clock::time_point until;
  index_.set_retention_limit(3);
  ASSERT_TRUE(index_.retain(ns_, a_, seconds(60), now, &until));   // 2 pages
  EXPECT_FALSE(index_.retain(ns_, c_, seconds(60), now, &until));  // 2 more: over 3
  EXPECT_EQ(index_.stats().retention_refused, 1);
  ASSERT_TRUE(index_.retain(ns_, range(1, 4), seconds(120), now, &until));  // 1 page: fits
  EXPECT_EQ(index_.stats().retained_pages, 3);
  // Mid-run retention split [1..4] off nothing new (it already ends there).
  EXPECT_EQ(index_.stats().entries, 4);
  // LRU alone frees B and C; an override ends A's retention (sooner to lapse) first.
  EXPECT_EQ(index_.evict(48), 48u);
  EXPECT_EQ(index_.stats().retention_overridden, 0);
  EXPECT_EQ(index_.evict(16, RadixIndex::Retention::kOverrideRetention), 16u);  // A's tail
  EXPECT_EQ(index_.stats().retention_overridden, 1);
  EXPECT_TRUE(pool_.is_free(1));
  EXPECT_FALSE(pool_.is_free(0));  // [1..4] keeps its own lifetime
  EXPECT_EQ(index_.stats().retained, 1);
  // Pins still hold against an override.
  ASSERT_TRUE(index_.pin(ns_, range(1, 4)));
  EXPECT_EQ(index_.evict(1000, RadixIndex::Retention::kOverrideRetention), 0u);
  EXPECT_TRUE(index_.unpin(ns_, range(1, 4)));
  EXPECT_EQ(index_.evict(1000, RadixIndex::Retention::kOverrideRetention), 16u);
  EXPECT_EQ(index_.stats().retained, 0);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixEvictionTest, ListingVisitsEveryLeaf) {
  EXPECT_EQ(index_.namespaces(), std::vector<KvNamespace>{ns_});
  EXPECT_EQ(match_len(cat(a_, {0})), 8);
  std::vector<std::vector<int32_t>> seen;
  std::vector<int64_t> lengths, hits;
  index_.for_each_leaf(ns_, [&](int32_t id) {
    const RadixIndex::NodeView v = index_.node(id);
    EXPECT_TRUE(v.leaf);
    seen.push_back(tokens_of(v));
    lengths.push_back(v.depth + int64_t(v.tokens.size()));
    hits.push_back(v.hits);
  });
  // Depth first, children in token order: [1..4] → A's tail, B's tail; then C.
  EXPECT_EQ(seen, (std::vector<std::vector<int32_t>>{range(5, 8), seq({9, 9, 9, 9}), c_}));
  EXPECT_EQ(lengths, (std::vector<int64_t>{8, 8, 5}));
  EXPECT_EQ(hits, (std::vector<int64_t>{1, 0, 0}));  // the match above; B's only reached [1..4]
  index_.for_each_leaf(KvNamespace{"other", "f16", ""}, [&](int32_t) { ADD_FAILURE(); });
}

TEST_F(RadixIndexTest, PinMidRunSplitsAndSharesThePage) {
  EXPECT_EQ(run(range(1, 8)), 0);  // pages 0 1
  EXPECT_TRUE(index_.pin(ns_, range(1, 6)));
  EXPECT_EQ(pool_.cache_refs(1), 2);
  EXPECT_FALSE(index_.pin(ns_, seq({1, 2, 9})));
  EXPECT_FALSE(index_.pin(ns_, {}));
  EXPECT_FALSE(index_.pin(KvNamespace{"other", "f16", ""}, range(1, 6)));
  EXPECT_EQ(index_.evict(1000), 0u);  // the tail [7 8] goes, page 1 stays
  EXPECT_EQ(index_.stats().entries, 1);
  EXPECT_EQ(pool_.cache_refs(1), 1);
  EXPECT_EQ(match_len(range(1, 8)), 6);
  EXPECT_TRUE(index_.unpin(ns_, range(1, 6)));
  EXPECT_EQ(index_.evict(1000), 32u);
  EXPECT_EQ(pool_.n_free(), 11);
}

TEST_F(RadixIndexTest, NamespacesAreIsolated) {
  const KvNamespace tenant_b{"smollm-135m", "f16", "tenant-b"};
  const KvNamespace q8{"smollm-135m", "q8_0", ""};
  const auto a = range(1, 6);
  EXPECT_EQ(run(a), 0);  // pages 0 1
  PrefixMatch m = match(cat(a, {7}), &tenant_b);
  EXPECT_EQ(m.length, 0);
  EXPECT_EQ(m.node, -1);
  EXPECT_EQ(match(cat(a, {7}), &q8).length, 0);
  EXPECT_EQ(test::run(index_, pool_, tenant_b, a), 0);  // pages 2 3
  EXPECT_EQ(slices_of(match(cat(a, {7}))),
            (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 2}}));
  EXPECT_EQ(slices_of(match(cat(a, {7}), &tenant_b)),
            (std::vector<PageSlice>{{2, 0, 4}, {3, 0, 2}}));
  EXPECT_EQ(index_.stats().misses, 4);
}

TEST_F(RadixIndexTest, KindAndSaltSeparateNamespaces) {
  // Namespaces that differ only in kind, in salt, or in a module's segment never
  // share an entry.
  const KvNamespace approx = ns_.as(KvKind::kApproximate);
  const KvNamespace block = ns_.as(KvKind::kBlock);
  const KvNamespace salted{ns_.model, ns_.kv_type, CacheScope("", "s")};
  const KvNamespace seg0 = ns_.module_segment(42, 0), seg1 = ns_.module_segment(42, 1);
  const auto a = range(1, 6);
  EXPECT_EQ(run(a), 0);
  for (const KvNamespace* other : {&approx, &block, &salted, &seg0, &seg1})
    EXPECT_EQ(match(cat(a, {7}), other).length, 0) << to_string(other->kind);
  EXPECT_EQ(test::run(index_, pool_, seg0, a), 0);
  EXPECT_EQ(match(cat(a, {7}), &seg1).length, 0);
  EXPECT_EQ(match(cat(a, {7}), &seg0).length, 6);
  EXPECT_EQ(index_.namespaces().size(), 2u);
}

TEST_F(RadixIndexTest, CallerSetsTheLimit) {
  const auto a = range(1, 8);  // 8 tokens
  EXPECT_EQ(run(a), 0);
  EXPECT_EQ(index_.match_prefix(ns_, a, 8).length, 8);  // all of it, when the caller needs no logits
  EXPECT_EQ(index_.match_prefix(ns_, a, 7).length, 7);  // size - 1: the last token is computed
  EXPECT_EQ(index_.match_prefix(ns_, a, 3).length, 3);
  EXPECT_EQ(index_.match_prefix(ns_, a, 0).length, 0);
  EXPECT_EQ(index_.match_prefix(ns_, a, 100).length, 8);  // never past the query
}

TEST_F(RadixIndexTest, PeekChangesNothing) {
  const auto a = range(1, 10);  // 10 tokens: one node, pages 0 1 2
  EXPECT_EQ(run(a), 0);
  const RadixStats before = index_.stats();
  // A peek that ends mid-run: no split, no counts, the matched slices cut to length.
  const auto q = cat(range(1, 6), {99});  // 6 of them, then another
  const PrefixMatch m = index_.match_prefix(ns_, q, int32_t(q.size()), RadixIndex::MatchUse::kPeek);
  EXPECT_EQ(m.length, 6);
  EXPECT_EQ(slices_of(m), (std::vector<PageSlice>{{0, 0, 4}, {1, 0, 2}}));
  const RadixStats after = index_.stats();
  EXPECT_EQ(after.entries, before.entries);  // the node count
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(index_.node(m.node).tokens.size(), 10u);  // the whole run, not split
  // Locking the node a peek returns keeps its slices alive through an eviction.
  index_.lock(m.node);
  EXPECT_EQ(index_.evict(1000), 0u);
  index_.unlock(m.node);
  // A request match splits where it ends, as before.
  EXPECT_EQ(match_len(q), 6);
  EXPECT_EQ(index_.stats().entries, before.entries + 1);
}

TEST_F(RadixIndexTest, LockMisuseIsRejected) {
  EXPECT_EQ(run(range(1, 6)), 0);
  const PrefixMatch m = match(range(1, 7));
  EXPECT_THROW(index_.unlock(m.node), std::logic_error);
  index_.lock(-1);  // no namespace: no-op
  index_.unlock(-1);
  const auto t = range(1, 3);
  PageTable wrong(pool_);
  EXPECT_THROW(index_.insert(ns_, t, wrong), std::logic_error);  // 3 tokens, empty table
}

class SmallPoolTest : public RadixIndexTest {
 protected:
  SmallPoolTest() : RadixIndexTest(4) {}
};

// Lazy eviction: a released sequence's pages keep serving hits until the pool
// needs them; then the least recently used leaf goes and its pages are reused.
TEST_F(SmallPoolTest, CachedPagesServeHitsUntilReallocated) {
  const auto a = range(1, 8);
  EXPECT_EQ(run(a), 0);  // pages 0 1
  PageTable x(pool_);
  ASSERT_TRUE(x.prepare_append(8));  // pages 2 3, from the free list
  EXPECT_EQ(pool_.n_free(), 0);
  EXPECT_EQ(match_len(cat(a, {0})), 8);  // still a hit

  ASSERT_TRUE(x.prepare_append(1));  // no free page: A is evicted, its last released page reused
  EXPECT_EQ(entries_of(x), (std::vector<PageEntry>{{2, 4}, {3, 4}, {1, 1}}));
  EXPECT_EQ(match_len(cat(a, {0})), 0);
  EXPECT_EQ(index_.stats().evicted, 1);
  EXPECT_EQ(pool_.n_in_use(), 3);
  EXPECT_EQ(pool_.n_cached(), 0);
  EXPECT_EQ(pool_.n_free(), 1);

  PageTable y(pool_);
  EXPECT_FALSE(y.prepare_append(8));  // one page free, nothing to evict
  EXPECT_EQ(pool_.n_free(), 1);
  EXPECT_EQ(pool_.alloc(), 0);
  EXPECT_EQ(pool_.alloc(), -1);
  pool_.unref(0);
}

}  // namespace
}  // namespace pc
