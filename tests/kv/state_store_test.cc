// The state store (recurrent-state snapshots in KV pages) and its radix-index owner:
// exact page accounting, byte-exact round trips, release with the node that holds a
// snapshot, and the longest snapshotted prefix a match may resume from.
#include "kv/state_store.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kv/kv_storage.h"
#include "kv/radix_index.h"
#include "kv_fixture.h"

namespace pc {
namespace {

std::vector<float> ramp(size_t n, float from) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(StateStore, SnapshotsTakeWholePagesAndRoundTripByteForByte) {
  KvStorage storage(test::tiny_shape(), 8);  // 16 bytes a page
  PagePool pool(storage);
  StateStore store(pool);
  const std::vector<float> a = ramp(10, 0.5f);  // 40 bytes: 3 pages
  const int32_t h = store.put(a, 7);
  ASSERT_GE(h, 0);
  EXPECT_EQ(store.count(), 1);
  EXPECT_EQ(store.bytes(), 3 * 16);
  EXPECT_EQ(pool.n_cached(), 3);
  EXPECT_EQ(pool.n_free(), 5);
  std::vector<float> back(10, -1.f);
  store.get(h, back);
  EXPECT_EQ(back, a);
  EXPECT_EQ(store.n_tokens(h), 7);
  EXPECT_EQ(store.release(h), size_t(3 * 16));
  EXPECT_EQ(store.count(), 0);
  EXPECT_EQ(pool.n_free(), 8);
  test::expect_accounting_adds_up(pool);
}

TEST(StateStore, PutFailsWhenThePoolHasNoPages) {
  PagePool pool(test::tiny_shape(), 2);
  StateStore store(pool);
  EXPECT_EQ(store.put(ramp(10, 0), 1), -1);  // needs 3
  EXPECT_EQ(pool.n_free(), 2);                // nothing kept
  const int32_t h = store.put(ramp(8, 0), 1);  // 2 pages
  ASSERT_GE(h, 0);
  std::vector<float> back(8);
  store.get(h, back);  // simulated pool: kept on the heap
  EXPECT_EQ(back, ramp(8, 0));
}

class SnapshotIndexTest : public ::testing::Test {
 protected:
  SnapshotIndexTest() : pool_(test::tiny_shape(), 12), store_(pool_), index_(pool_) {
    pool_.set_reclaimer(&index_);
    index_.set_state_store(&store_);
  }
  void TearDown() override {
    index_.check_invariants();
    test::expect_accounting_adds_up(pool_);
  }
  void snapshot_at(const std::vector<int32_t>& tokens, int32_t at) {
    const int32_t node = index_.node_ending(ns_, std::span(tokens).first(size_t(at)));
    ASSERT_GE(node, 0);
    const int32_t h = store_.put(ramp(4, float(at)), at);  // one page
    ASSERT_GE(h, 0);
    index_.set_node_state(node, h);
  }
  PagePool pool_;
  StateStore store_;
  RadixIndex index_;
  KvNamespace ns_{"m", "f16", {}};
};

TEST_F(SnapshotIndexTest, AMatchResumesAtTheLongestSnapshottedPrefix) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_EQ(test::run(index_, pool_, ns_, a), 0);
  snapshot_at(a, 3);
  snapshot_at(a, 7);
  int32_t h = -1;
  // Diverging after token 6: the snapshot at 3 (the one at 7 is past the match).
  EXPECT_EQ(index_.state_prefix(ns_, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 0}, 7, &h), 3);
  EXPECT_EQ(store_.n_tokens(h), 3);
  // The whole run: the snapshot at 7; capped by max_length: at 3 again.
  EXPECT_EQ(index_.state_prefix(ns_, a, 8, &h), 7);
  EXPECT_EQ(store_.n_tokens(h), 7);
  EXPECT_EQ(index_.state_prefix(ns_, a, 6, &h), 3);
  // Nothing before the first snapshot.
  EXPECT_EQ(index_.state_prefix(ns_, std::vector<int32_t>{1, 2, 0}, 3, &h), 0);
  EXPECT_EQ(h, -1);
  // A split of the node (a second prompt diverging after token 5) keeps the snapshot
  // at 7 on the deeper half.
  ASSERT_EQ(test::run(index_, pool_, ns_, {1, 2, 3, 4, 5, 0, 0}), 5);
  EXPECT_EQ(index_.state_prefix(ns_, a, 8, &h), 7);
}

TEST_F(SnapshotIndexTest, SnapshotsGoWithTheirNode) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(test::run(index_, pool_, ns_, a), 0);  // 2 pages
  snapshot_at(a, 4);
  snapshot_at(a, 8);
  EXPECT_EQ(store_.count(), 2);
  EXPECT_EQ(pool_.n_cached(), 4);
  // Evicting everything frees the KV pages and the snapshots' pages.
  EXPECT_EQ(index_.evict(SIZE_MAX), size_t(4 * 16));
  EXPECT_EQ(store_.count(), 0);
  EXPECT_EQ(pool_.n_free(), 12);
}

}  // namespace
}  // namespace pc
