#include "tier/tier_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

// Polls until nothing is in flight (tests only; an engine polls once per step).
void drain(TierWorker& w) {
  while (w.in_flight() > 0) {
    w.wait_ready(100);
    w.poll();
  }
}

TEST(TierWorker, CompletionsRunOnThePollingThreadInOrder) {
  TierWorker w;
  const auto me = std::this_thread::get_id();
  std::vector<int> order;
  std::atomic<int> ran_off_thread{0};
  for (int i = 0; i < 20; ++i) {
    w.submit([&, me] { ran_off_thread += std::this_thread::get_id() != me; },
             [&, i, me](std::exception_ptr e) {
               EXPECT_FALSE(e);
               EXPECT_EQ(std::this_thread::get_id(), me);
               order.push_back(i);
             });
  }
  drain(w);
  EXPECT_EQ(ran_off_thread.load(), 20);
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(w.poll(), 0u);
}

TEST(TierWorker, ExceptionsAndValuesReachTheCompletion) {
  TierWorker w;
  std::string error;
  w.submit([] { throw std::runtime_error("disk on fire"); },
           [&](std::exception_ptr e) {
             try {
               std::rethrow_exception(e);
             } catch (const std::exception& x) {
               error = x.what();
             }
           });
  int value = 0;
  w.submit_value<int>([] { return 42; }, [&](std::optional<int>& v, std::exception_ptr e) {
    ASSERT_FALSE(e);
    value = *v;
  });
  drain(w);
  EXPECT_EQ(error, "disk on fire");
  EXPECT_EQ(value, 42);
}

TEST(TierWorker, CompletionMaySubmitMoreAndPollIsBounded) {
  TierWorker w;
  int done = 0;
  w.submit(nullptr, [&](std::exception_ptr) {
    ++done;
    w.submit(nullptr, [&](std::exception_ptr) { ++done; });
  });
  drain(w);
  EXPECT_EQ(done, 2);
  for (int i = 0; i < 5; ++i) w.submit(nullptr, [&](std::exception_ptr) { ++done; });
  while (w.wait_ready(100) && w.in_flight() > 0) {
    EXPECT_LE(w.poll(2), 2u);
  }
  drain(w);
  EXPECT_EQ(done, 7);
}

TEST(TierWorker, DestructorFinishesQueuedWork) {
  std::atomic<int> ran{0};
  {
    TierWorker w;
    for (int i = 0; i < 50; ++i) w.submit([&] { ++ran; }, nullptr);
  }
  EXPECT_EQ(ran.load(), 50);
}

// Demotion and promotion through the worker: the engine thread keeps the pages, the
// worker serializes and writes, then reads and validates; the engine restores.
TEST(TierWorker, DiskRoundTripOffThread) {
  KvStorage kv(test::small_shape(), 8);
  test::fill_pattern(kv, {0, 1, 2}, 3);
  DiskTier disk(test::temp_dir() + "/c", 1 << 20);
  TierWorker w;
  const auto tokens = test::token_run(40);
  TierStatus put = TierStatus::kIoError;
  w.submit_value<TierStatus>(
      [&] { return disk.put(serialize_entry(kv, std::vector<int32_t>{0, 1, 2}, tokens, test::small_ns())); },
      [&](std::optional<TierStatus>& s, std::exception_ptr) { put = *s; });
  drain(w);
  ASSERT_EQ(put, TierStatus::kOk);
  std::vector<int32_t> out{5, 6, 7};
  EntryError restored = EntryError::kCorrupt;
  w.submit_value<TierLookup>(
      [&] { return disk.get(test::small_ns(), test::small_shape(), tokens); },
      [&](std::optional<TierLookup>& r, std::exception_ptr) {
        ASSERT_TRUE(r->hit());
        restored = restore_entry(r->entry, kv, out);
      });
  drain(w);
  ASSERT_EQ(restored, EntryError::kOk);
  EXPECT_EQ(test::kv_image(kv, out, 40), test::kv_image(kv, {0, 1, 2}, 40));
}

}  // namespace
}  // namespace pc
