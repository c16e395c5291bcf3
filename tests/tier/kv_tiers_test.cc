// KvTiers over a small real KV store: module entries written through and loaded back
// asynchronously (found, not found, no memory), the synchronous forms, and a lookup
// going down an ordered list of tiers, copying its hit into the faster ones.
#include "engine/kv_tiers.h"
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <stdexcept>

#include "kv/module_store.h"
#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/entry_key.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

using test::small_ns;
using test::small_shape;

// A KvTier holding entries in a map: a stand-in for "whatever tier comes next".
class MapTier final : public KvTier {
 public:
  const char* name() const override { return "map"; }
  TierStatus put(std::span<const uint8_t> bytes, int64_t = 0) override {
    Decoded<EntryInfo> h = parse_entry_header(bytes, bytes.size());
    if (!h.ok()) return TierStatus::kInvalid;
    ++puts_;
    items_[h.value.key()].assign(bytes.begin(), bytes.end());
    return TierStatus::kOk;
  }
  TierLookup get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) override {
    return find(entry_key(ns, shape, tokens), ns, shape, LinkPos{}, tokens);
  }
  TierLookup find(uint64_t key, const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                  std::span<const int32_t> tokens) {
    TierLookup r;
    auto it = items_.find(key);
    if (it != items_.end()) {
      Decoded<Entry> d = deserialize_entry(it->second, EntryExpect{ns.model, ns.kv_type, shape});
      if (d.ok() && d.value.info.is(ns, link, tokens)) {
        r.status = TierStatus::kOk;
        r.length = int32_t(tokens.size());
        r.entry = std::move(d.value);
      }
    }
    ++(r.hit() ? hits_ : misses_);
    return r;
  }
  TierChain read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                       std::span<const ChainLink> links) override {
    TierChain c;
    for (const ChainLink& l : links) {
      TierLookup r = find(l.key, ns, shape, LinkPos{l.start, l.parent}, tokens.subspan(size_t(l.start), size_t(l.length)));
      if (!r.hit()) break;
      c.links.push_back(std::move(r.entry));
    }
    if (!c.links.empty()) c.status = TierStatus::kOk;
    return c;
  }
  TierLookup get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                       std::span<const int32_t> tokens, uint64_t state_bytes) override {
    TierLookup r = find(state_key(ns, shape, link.parent, tokens), ns, shape, link, tokens);
    if (r.hit() && r.entry.info.state_bytes != state_bytes) return {};
    return r;
  }
  std::vector<char> has(std::span<const uint64_t> keys) override {
    std::vector<char> out;
    for (uint64_t k : keys) out.push_back(items_.count(k) ? 1 : 0);
    return out;
  }
  uint64_t generation() override { return gen; }
  void clear() { items_.clear(); }
  size_t size() const { return items_.size(); }
  std::atomic<uint64_t> gen{0};  // 0: no generations (a local tier)

  TierStats stats() const override {
    TierStats s;
    s.name = name();
    s.entries = int64_t(items_.size());
    s.hits = hits_;
    s.misses = misses_;
    s.puts = puts_;
    return s;
  }

 private:
  std::map<uint64_t, std::vector<uint8_t>> items_;
  int64_t hits_ = 0, misses_ = 0, puts_ = 0;
};

struct KvTiersTest : ::testing::Test {
  KvStorage kv{small_shape(), 12};
  PagePool pool{kv};
  PrefixCache prefix{pool, true};  // no tiers of its own: these tests call KvTiers directly
  struct Reclaim : PageReclaimer {
    PrefixCache* prefix;
    explicit Reclaim(PrefixCache* p) : prefix(p) {}
    size_t reclaim(size_t bytes) override { return prefix->reclaim(bytes); }
  } reclaim{&prefix};
  std::string dir = test::temp_dir() + "/disk";
  // A module of 40 tokens in two segments, [0, 16) and [16, 40), each on fresh pages.
  std::vector<int32_t> tokens = test::token_run(40, 500);
  KvTiers::Segments ranges{{0, 16}, {16, 40}};
  PageTable seg0{pool}, seg1{pool};
  std::vector<test::KvImage> want;

  void SetUp() override {
    pool.set_reclaimer(&reclaim);
    ASSERT_TRUE(seg0.prepare_append(16));
    ASSERT_TRUE(seg1.prepare_append(24));
    test::fill_pattern(kv, pages(seg0.entries()), 1, 0);
    test::fill_pattern(kv, pages(seg1.entries()), 2, 16);
    want = {test::kv_image(kv, pages(seg0.entries()), 16), test::kv_image(kv, pages(seg1.entries()), 24)};
  }
  static std::vector<int32_t> pages(std::span<const PageEntry> entries) {
    std::vector<int32_t> out;
    for (const PageEntry& e : entries) out.push_back(e.page);
    return out;
  }
  std::vector<std::vector<PageEntry>> segments() const {
    return {{seg0.entries().begin(), seg0.entries().end()}, {seg1.entries().begin(), seg1.entries().end()}};
  }
  TierOptions disk_options() const {
    TierOptions o;
    o.disk_dir = dir;
    o.disk_fsync = false;
    return o;
  }
  // Calls load_module_async and runs its completion; what done saw.
  struct Loaded {
    bool called = false;
    bool found = false;
    std::vector<std::vector<PageEntry>> segments;
  };
  Loaded load_async(KvTiers& t, uint64_t digest, std::vector<int32_t> toks) {
    Loaded l;
    t.load_module_async(small_ns(), digest, std::move(toks), ranges, [&](RestoredModule* m) {
      l.called = true;
      if (!m) return;
      l.found = true;
      l.segments = m->segments;
      // The pages stay held while done runs; afterwards only the caller's copy would.
      for (const auto& seg : m->segments)
        for (const PageEntry& e : seg) EXPECT_GE(pool.refcount(e.page), 1);
    });
    EXPECT_FALSE(l.called) << "done runs from poll(), not from the call";
    t.flush();
    EXPECT_TRUE(l.called);
    return l;
  }
};

TEST_F(KvTiersTest, ModuleLoadsAsynchronously) {
  KvTiers t(disk_options(), pool, prefix);
  t.save_module(small_ns(), 77, tokens, segments());
  t.flush();
  EXPECT_EQ(t.stats().writes, 2);
  seg0.release();
  seg1.release();
  const int32_t free_before = pool.n_free();

  const Loaded l = load_async(t, 77, tokens);
  ASSERT_TRUE(l.found);
  ASSERT_EQ(l.segments.size(), 2u);
  EXPECT_EQ(l.segments[0].size(), 1u);
  EXPECT_EQ(l.segments[1].size(), 2u);
  EXPECT_EQ(l.segments[1][1].filled, 8);
  EXPECT_EQ(test::kv_image(kv, pages(l.segments[0]), 16), want[0]);
  EXPECT_EQ(test::kv_image(kv, pages(l.segments[1]), 24), want[1]);
  EXPECT_EQ(pool.n_free(), free_before);  // nobody kept the hold: the pages went back
  EXPECT_EQ(t.stats().module_loads, 1);
  EXPECT_EQ(t.stats().hits, std::vector<int64_t>{2});  // two segment entries from the disk
  EXPECT_EQ(t.stats().promoted_tokens, 40);
}

TEST_F(KvTiersTest, ModuleNotFoundIsNull) {
  KvTiers t(disk_options(), pool, prefix);
  t.save_module(small_ns(), 77, tokens, segments());
  t.flush();
  EXPECT_FALSE(load_async(t, 78, tokens).found);  // another digest: no entry at all
  std::vector<int32_t> other = tokens;
  other[30] = 9;  // the first segment is there, the second is not: all or nothing
  EXPECT_FALSE(load_async(t, 77, other).found);
  EXPECT_EQ(t.stats().module_loads, 0);
  EXPECT_EQ(t.stats().hits, std::vector<int64_t>{0});
}

TEST_F(KvTiersTest, ModuleWithoutMemoryIsNull) {
  KvTiers t(disk_options(), pool, prefix);
  t.save_module(small_ns(), 77, tokens, segments());
  t.flush();
  PageTable filler(pool);  // one free page left: the first segment fits, the second not
  ASSERT_TRUE(filler.prepare_append((pool.n_free() - 1) * small_shape().page_size));
  ASSERT_EQ(pool.n_free(), 1);
  const int32_t held = pool.n_in_use();
  EXPECT_FALSE(load_async(t, 77, tokens).found);
  EXPECT_EQ(pool.n_in_use(), held);  // the first segment's restored page was given back
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(t.stats().module_loads, 0);
}

TEST_F(KvTiersTest, SynchronousFormsStillWork) {
  KvTiers t(disk_options(), pool, prefix);
  ModuleEntry saved;
  saved.segments = {ModuleSegment{0, 16, segments()[0]}, ModuleSegment{16, 40, segments()[1]}};
  t.save_module(small_ns(), 5, tokens, saved);
  t.flush();
  ModuleEntry got;
  std::vector<PageTable> hold;
  ASSERT_TRUE(t.load_module(small_ns(), 5, tokens, ranges, &got, &hold));
  ASSERT_EQ(got.segments.size(), 2u);
  EXPECT_EQ(got.segments[1].tok_begin, 16);
  EXPECT_EQ(got.segments[1].tok_end, 40);
  EXPECT_EQ(test::kv_image(kv, pages(got.segments[1].entries), 24), want[1]);
  ASSERT_EQ(hold.size(), 1u);
  EXPECT_FALSE(t.load_module(small_ns(), 6, tokens, ranges, &got, &hold));
  EXPECT_THROW(t.load_module(small_ns(), 5, tokens, {{0, 41}}, &got, &hold), std::invalid_argument);
  EXPECT_THROW(t.save_module(small_ns(), 5, std::span(tokens).first(39), segments()), std::invalid_argument);
}

// Beyond max_pending_writes, writes wait (deferred) instead of being dropped; a tier
// whose generation changes (Redis restarted empty) gets every prefix memory holds again.
TEST_F(KvTiersTest, DeferredWritesAllLandAndALostTierIsWrittenAgain) {
  auto owned = std::make_unique<MapTier>();
  MapTier* map = owned.get();
  std::vector<std::unique_ptr<KvTier>> list;
  list.push_back(std::move(owned));
  TierOptions o;
  o.max_pending_writes = 1;
  o.check_interval_ms = 0;
  KvTiers t(std::move(list), o, pool, prefix);
  std::vector<std::vector<int32_t>> prefixes;
  for (int k = 0; k < 4; ++k) {
    prefixes.push_back(test::token_run(16, 1000 + 100 * k));
    PageTable p(pool);
    ASSERT_TRUE(p.prepare_append(16));
    prefix.insert(small_ns(), prefixes.back(), p);
  }
  for (const auto& p : prefixes) EXPECT_EQ(t.save_prefix(small_ns(), p), 16);
  t.flush();
  EXPECT_EQ(t.stats().writes, 4);
  EXPECT_EQ(t.stats().writes_deferred, 3);  // one in flight at a time
  EXPECT_EQ(t.stats().writes_skipped, 0);
  EXPECT_EQ(map->size(), 4u);

  map->gen = 1;  // first sight: nothing to do
  t.tick();
  t.flush();
  EXPECT_EQ(t.stats().tier_resets, 0);
  map->clear();  // the store lost everything, and says so
  map->gen = 2;
  t.tick();
  t.flush();
  EXPECT_EQ(t.stats().tier_resets, 1);
  EXPECT_EQ(t.stats().rewritten, 4);
  EXPECT_EQ(map->size(), 4u);
  EXPECT_EQ(t.stats().writes_skipped, 0);
}

TEST_F(KvTiersTest, ConversationsSharingAPrefixStoreItsPagesOnce) {
  auto owned = std::make_unique<MapTier>();
  MapTier* map = owned.get();
  std::vector<std::unique_ptr<KvTier>> list;
  list.push_back(std::move(owned));
  KvTiers t(std::move(list), TierOptions{}, pool, prefix);
  // Two conversations of 48 tokens sharing their first 32; then a's next turn, 16 more.
  std::vector<int32_t> a = test::token_run(64, 700);
  std::vector<int32_t> b(a.begin(), a.begin() + 48);
  for (size_t i = 32; i < 48; ++i) b[i] = 9000 + int32_t(i);
  auto cache = [&](std::span<const int32_t> toks) {
    PageTable p(pool);
    ASSERT_TRUE(p.prepare_append(int32_t(toks.size())));
    test::fill_pattern(kv, pages(p.entries()), 7, 0);
    prefix.insert(small_ns(), toks, p);
  };
  cache(std::span(a).first(48));
  cache(b);
  EXPECT_EQ(t.save_prefix(small_ns(), std::span(a).first(48)), 48);
  EXPECT_EQ(t.save_prefix(small_ns(), b), 48);
  t.flush();
  EXPECT_EQ(map->size(), 4u);  // 2 shared links + 1 + 1, not 6
  EXPECT_EQ(t.stats().writes, 4);
  const int64_t link_bytes = t.stats().written_bytes / 4;
  // The next turn of a: one new link; saving the same prefix again writes nothing.
  cache(a);
  EXPECT_EQ(t.save_prefix(small_ns(), a), 64);
  EXPECT_EQ(t.save_prefix(small_ns(), std::span(a).first(60)), 0);
  t.flush();
  EXPECT_EQ(map->size(), 5u);
  EXPECT_EQ(t.stats().writes, 5);
  EXPECT_EQ(t.stats().written_bytes, 5 * link_bytes);
  // Another engine over the same store (a restart) writes nothing the store has.
  KvTiers t2(std::vector<std::unique_ptr<KvTier>>{}, TierOptions{}, pool, prefix);
  (void)t2;
  const int64_t puts = map->stats().puts;
  t.flush();
  EXPECT_EQ(map->stats().puts, puts);
}

TEST_F(KvTiersTest, LookupGoesDownTheListAndCopiesUp) {
  auto slow = std::make_unique<MapTier>();
  MapTier* map = slow.get();
  // An entry only the slow tier has: tokens [0, 32) of a prefix, put there directly.
  prefix.insert(small_ns(), std::span(tokens).first(16), seg0);
  PageTable two(pool);
  ASSERT_TRUE(two.prepare_append(32));
  test::fill_pattern(kv, pages(two.entries()), 3, 0);
  for (const auto& link : serialize_chain(kv, pages(two.entries()), std::span(tokens).first(32), small_ns()))
    ASSERT_EQ(map->put(link), TierStatus::kOk);
  two.release();

  std::vector<std::unique_ptr<KvTier>> list;
  list.push_back(std::make_unique<DiskTier>(dir, uint64_t(1) << 20));
  list.push_back(std::move(slow));
  KvTiers t(std::move(list), TierOptions{}, pool, prefix);
  ASSERT_EQ(t.tiers().size(), 2u);
  EXPECT_STREQ(t.tiers()[0]->name(), "disk");
  EXPECT_STREQ(t.tiers()[1]->name(), "map");

  int32_t restored = -1;
  t.promote_prefix(small_ns(), std::span(tokens).first(39), 16, [&](int32_t n) { restored = n; });
  t.flush();
  EXPECT_EQ(restored, 16);  // tokens [16, 32) were new to the index
  EXPECT_EQ(t.stats().hits, (std::vector<int64_t>{0, 1}));
  const std::vector<TierStats> s = t.tier_stats();
  EXPECT_EQ(s[0].name, "disk");
  EXPECT_EQ(s[0].misses, 1);
  EXPECT_EQ(s[0].entries, 1);  // the copy of link 1 (memory had link 0's page)
  EXPECT_EQ(s[1].hits, 1);
  EXPECT_EQ(t.stats().links_read, 1);

  // The next lookup stops at the disk.
  restored = -1;
  t.promote_prefix(small_ns(), std::span(tokens).first(39), 16, [&](int32_t n) { restored = n; });
  t.flush();
  EXPECT_EQ(restored, 0);  // found again, nothing new for the index
  EXPECT_EQ(t.stats().hits, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(t.tier_stats()[1].hits, 1);
}

}  // namespace
}  // namespace pc
