// ThreadPool: n-1 worker threads plus the calling thread.
//
// Protocol (one parallel_for at a time; the pool is not reentrant):
//
//   counter_ (64 bits) = generation << 32 | next task index.
//   The caller starts call g+1 by storing (g+1, kClosed), writing the call's
//   fields (fn, ctx, n_tasks), zeroing done_, then storing (g+1, 0). Workers
//   claim tasks one at a time with a CAS on counter_ that also checks the
//   generation, so a worker that read stale fields (from an old or a newer call)
//   can never run a task with them: the fields are validated seqlock-style (read
//   fields, acquire fence, then the CAS must still see the same generation and an
//   index that is not kClosed). The caller returns once done_ == n_tasks, without
//   waiting for workers that never woke up; a late worker just finds no tasks.
//
//   parallel_shares calls publish the same way with `shares` set and leave the
//   index at 0: each thread's share is a word gen << 32 | front << 16 | back
//   (blocks [front, back) still unclaimed), written before the publish. The
//   owner claims its front block, others its back one, each with a CAS that
//   also checks the generation; a worker validates the call's fields by
//   reading counter_ again after them. A thread adds the blocks it ran to
//   done_ once, when no share has blocks left (no per-block traffic on a
//   shared line).
//
//   Idle workers spin (with pause) for a short while after their last call, then
//   sleep on a condition variable. The caller only takes the mutex to notify when
//   a worker announced that it sleeps (sleepers_ > 0), so back-to-back calls (a
//   decode step issues ~200) cost a few atomic operations each.
//
// No allocation per call: fn/ctx are a plain function pointer and a pointer to
// the caller's lambda.
#include "kernels/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PC_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define PC_PAUSE() __asm__ volatile("yield")
#else
#define PC_PAUSE() ((void)0)
#endif

namespace pc {

namespace {
constexpr uint64_t kClosed = 0xFFFFFFFFu;
constexpr uint64_t kIndexMask = 0xFFFFFFFFu;
// How long an idle worker spins before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);
}  // namespace

struct ThreadPool::Impl {
  alignas(64) std::atomic<uint64_t> counter{0};  // generation 0 = no call yet
  alignas(64) std::atomic<int64_t> done{0};
  alignas(64) std::atomic<TaskFn> fn{nullptr};
  std::atomic<void*> ctx{nullptr};
  std::atomic<int64_t> n_tasks{0};
  std::atomic<bool> shares_call{false};
  alignas(64) std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread> threads;
  uint32_t generation = 0;  // caller side only
  struct alignas(64) Share {
    std::atomic<uint64_t> word{0};
  };
  std::vector<Share> shares;  // one per thread

  // parallel_shares: runs thread t's share front to back, then the other
  // shares' blocks back to front; adds the blocks it ran to done once.
  void work_shares(uint32_t gen, int thread, TaskFn f, void* c) {
    const int n_threads = int(shares.size());
    int64_t ran = 0;
    for (int i = 0; i < n_threads; ++i) {
      const bool own = i == 0;
      std::atomic<uint64_t>& word = shares[size_t((thread + i) % n_threads)].word;
      uint64_t w = word.load(std::memory_order_acquire);
      for (;;) {
        const uint64_t front = (w >> 16) & 0xFFFF, back = w & 0xFFFF;
        if ((w >> 32) != gen || front >= back) break;
        const uint64_t next = own ? w + (uint64_t(1) << 16) : w - 1;
        if (word.compare_exchange_weak(w, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
          f(c, int64_t(own ? front : back - 1), thread);
          ++ran;
          w = next;
        }
      }
    }
    if (ran) done.fetch_add(ran, std::memory_order_release);
  }

  // Claims and runs tasks of generation `gen`. Returns when none are left.
  void work(uint32_t gen, int thread) {
    uint64_t v = counter.load(std::memory_order_acquire);
    for (;;) {
      if ((v >> 32) != gen || (v & kIndexMask) == kClosed) return;
      TaskFn f = fn.load(std::memory_order_relaxed);
      void* c = ctx.load(std::memory_order_relaxed);
      int64_t n = n_tasks.load(std::memory_order_relaxed);
      const bool by_shares = shares_call.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (by_shares) {
        // The fields are this generation's if counter_ did not move on.
        if (counter.load(std::memory_order_acquire) == v) work_shares(gen, thread, f, c);
        return;
      }
      int64_t idx = static_cast<int64_t>(v & kIndexMask);
      if (idx >= n) return;
      // Succeeds only if nobody claimed idx and the generation did not change,
      // which also proves f/c/n belong to this generation.
      if (counter.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        f(c, idx, thread);
        done.fetch_add(1, std::memory_order_release);
        v = counter.load(std::memory_order_acquire);
      }
    }
  }

  void worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
      // Wait for a new generation: spin first, then sleep.
      uint64_t v = counter.load(std::memory_order_acquire);
      auto new_call = [&](uint64_t x) {
        return static_cast<uint32_t>(x >> 32) != seen && (x & kIndexMask) != kClosed;
      };
      if (!new_call(v)) {
        auto start = std::chrono::steady_clock::now();
        int spins = 0;
        while (!new_call(v = counter.load(std::memory_order_acquire)) &&
               !stop.load(std::memory_order_relaxed)) {
          PC_PAUSE();
          if (++spins == 64) {
            spins = 0;
            if (std::chrono::steady_clock::now() - start > kSpin) break;
          }
        }
      }
      if (stop.load(std::memory_order_acquire)) return;
      if (!new_call(v)) {
        std::unique_lock<std::mutex> lock(mu);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        cv.wait(lock, [&] {
          v = counter.load(std::memory_order_seq_cst);
          return new_call(v) || stop.load(std::memory_order_seq_cst);
        });
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        if (stop.load(std::memory_order_acquire)) return;
      }
      seen = static_cast<uint32_t>(v >> 32);
      work(seen, thread);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  impl_ = new Impl;
  impl_->shares = std::vector<Impl::Share>(size_t(n_threads_));
  impl_->threads.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) impl_->threads.emplace_back([this, t] { impl_->worker_main(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop.store(true, std::memory_order_seq_cst);
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads) t.join();
  delete impl_;
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx, bool shares) {
  if (n_tasks <= 0) return;
  if (n_tasks > 0xFFFF) shares = false;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
    return;
  }
  Impl& s = *impl_;
  uint32_t gen = ++s.generation;
  if (gen == 0) gen = ++s.generation;  // 0 means "no call yet" to the workers
  const uint64_t base = static_cast<uint64_t>(gen) << 32;
  s.counter.store(base | kClosed, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.fn.store(fn, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.n_tasks.store(n_tasks, std::memory_order_relaxed);
  s.shares_call.store(shares, std::memory_order_relaxed);
  if (shares)
    for (int t = 0; t < n_threads_; ++t)
      s.shares[size_t(t)].word.store(uint64_t(gen) << 32 | uint64_t(n_tasks * t / n_threads_) << 16 |
                                         uint64_t(n_tasks * (t + 1) / n_threads_),
                                     std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  s.counter.store(base, std::memory_order_seq_cst);  // publish
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(s.mu); }
    s.cv.notify_all();
  }
  if (shares) s.work_shares(gen, 0, fn, ctx);
  else s.work(gen, 0);
  // All tasks are claimed; wait for the ones other threads are still running.
  int spins = 0;
  while (s.done.load(std::memory_order_acquire) < n_tasks) {
    PC_PAUSE();
    if (++spins > 4096) std::this_thread::yield();
  }
}

}  // namespace pc
