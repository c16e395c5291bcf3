#include "kernels/thread_pool.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu_count.h"

namespace pc {
namespace {

// The default thread count (every command's --threads): at least one, never
// more than the CPUs this process may run on, the same on every call.
TEST(ThreadPool, DefaultThreadCountIsTheUsableCores) {
  const int n = default_thread_count();
  EXPECT_GE(n, 1);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_LE(n, CPU_COUNT(&set));
  EXPECT_EQ(default_thread_count(), n);
  // A pool of that size runs every task once.
  ThreadPool pool(n);
  std::vector<std::atomic<int>> hits(97);
  pool.parallel_for(97, [&](int64_t t, int) { hits[size_t(t)]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, SizeOneRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  const auto me = std::this_thread::get_id();
  int count = 0;
  pool.parallel_for(100, [&](int64_t task, int thread) {
    EXPECT_EQ(std::this_thread::get_id(), me);
    EXPECT_EQ(thread, 0);
    EXPECT_EQ(task, count);  // in order
    ++count;
  });
  EXPECT_EQ(count, 100);
}

TEST(ThreadPool, ZeroTasksIsANoOp) {
  ThreadPool pool(3);
  int count = 0;
  pool.parallel_for(0, [&](int64_t, int) { ++count; });
  EXPECT_EQ(count, 0);
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int size : {1, 2, 3, 4}) {
    ThreadPool pool(size);
    std::vector<std::atomic<int>> hits(1000);
    std::atomic<int> bad_thread{0};
    const int64_t counts[] = {1, 2, 3, 7, 64, 1000};
    for (int rep = 0; rep < 3000; ++rep) {
      const int64_t n = counts[rep % 6];
      for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
      pool.parallel_for(n, [&](int64_t task, int thread) {
        hits[task].fetch_add(1, std::memory_order_relaxed);
        if (thread < 0 || thread >= size) bad_thread.fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "size " << size << " rep " << rep;
    }
    EXPECT_EQ(bad_thread.load(), 0);
  }
}

TEST(ThreadPool, UsesSeveralThreadsAndSurvivesSleep) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 5; ++rep) {
    // Let the workers go to sleep, then check they wake up and take part.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::atomic<int>> by_thread(3);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(300, [&](int64_t task, int thread) {
      by_thread[thread].fetch_add(1);
      sum.fetch_add(task);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
    EXPECT_EQ(sum.load(), 299 * 300 / 2);
    int users = 0;
    for (auto& b : by_thread) users += b.load() > 0;
    EXPECT_GE(users, 2);
  }
}

// parallel_shares: every block once for any pool size and block count (more
// than 65535 falls back to parallel_for), interleaved with parallel_for calls
// (the generations of both kinds share the workers).
TEST(ThreadPool, SharesRunEveryBlockExactlyOnce) {
  for (int size : {1, 2, 3, 4}) {
    ThreadPool pool(size);
    std::vector<std::atomic<int>> hits(70000);
    std::atomic<int> bad_thread{0};
    const int64_t counts[] = {1, 2, 3, 5, 7, 64, 1000, 65535, 70000};
    for (int rep = 0; rep < 1500; ++rep) {
      const int64_t n = counts[rep % 9];
      if (n > 1000 && rep % 50 >= 9) continue;  // the long calls a few times only
      for (int64_t i = 0; i < n; ++i) hits[size_t(i)].store(0, std::memory_order_relaxed);
      auto count = [&](int64_t block, int thread) {
        hits[size_t(block)].fetch_add(1, std::memory_order_relaxed);
        if (thread < 0 || thread >= size) bad_thread.fetch_add(1);
      };
      if (rep % 3 == 2) pool.parallel_for(n, count);
      else pool.parallel_shares(n, count);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "size " << size << " rep " << rep;
    }
    EXPECT_EQ(bad_thread.load(), 0);
  }
}

// A thread runs its own share front to back and takes others' blocks back
// to front; when the caller is held up on its first block, the other thread
// runs its own share and then takes the caller's blocks from the back.
TEST(ThreadPool, SharesRunInOrderAndAreTakenFromTheBack) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 20; ++rep) {
    const int64_t n = 40;
    std::vector<int64_t> order[2];
    std::atomic<int> stolen{0};
    pool.parallel_shares(n, [&](int64_t block, int thread) {
      if (block == 0 && thread == 0) {  // hold the caller until a block of its share was taken
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (stolen.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      }
      if (thread == 1 && block < n / 2) stolen.fetch_add(1);
      order[thread].push_back(block);
    });
    ASSERT_GT(stolen.load(), 0) << "rep " << rep;
    ASSERT_EQ(order[0].size() + order[1].size(), size_t(n));
    // Thread 1 ran all of its share (20..39) in order, then blocks of share 0
    // from 19 down.
    ASSERT_GE(order[1].size(), size_t(n / 2 + 1));
    for (int64_t i = 0; i < n / 2; ++i) ASSERT_EQ(order[1][size_t(i)], n / 2 + i);
    for (size_t i = n / 2; i < order[1].size(); ++i) ASSERT_EQ(order[1][i], n / 2 - 1 - int64_t(i - n / 2));
    // The caller ran the front of its share in order, and nothing of thread 1's.
    for (size_t i = 0; i < order[0].size(); ++i) ASSERT_EQ(order[0][i], int64_t(i));
  }
}

TEST(ThreadPool, DispatchOverhead) {
  ThreadPool pool(2);
  std::atomic<int64_t> sink{0};
  const int calls = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) pool.parallel_for(8, [&](int64_t t, int) { sink.fetch_add(t, std::memory_order_relaxed); });
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(sink.load(), int64_t(calls) * 28);
  std::printf("parallel_for(8 tiny tasks), 2 threads: %.2f us/call\n", us / calls);
}

TEST(ThreadPool, CreateDestroy) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    if (i % 2) pool.parallel_for(10, [](int64_t, int) {});
  }
}

}  // namespace
}  // namespace pc
