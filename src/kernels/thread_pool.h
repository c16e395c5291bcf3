// A fixed pool of worker threads for data-parallel loops. The calling thread
// takes part, so ThreadPool(1) runs everything inline. No allocation per call.
#pragma once
#include <cstdint>
#include <type_traits>

namespace pc {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, including the caller; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks), spread over the pool;
  // `thread` in [0, size()) identifies the executing thread (for per-thread
  // scratch). Returns when all tasks are done. Not reentrant.
  template <class F>
  void parallel_for(int64_t n_tasks, F&& fn) {
    run(n_tasks, call<std::remove_reference_t<F>>, &fn, false);
  }

  // Calls fn(block, thread) for every block in [0, n_blocks) like
  // parallel_for, but thread t owns the t-th of size() equal contiguous shares
  // of the blocks and runs them front to back; a thread done with its share
  // takes the last unclaimed block of another's, back to front. Threads that
  // keep pace each run one unbroken stretch of blocks (decode matmuls: one
  // stream of weights from memory a core, and no claim contended); a slowed or
  // late thread's blocks are evened out. More than 65535 blocks: parallel_for.
  template <class F>
  void parallel_shares(int64_t n_blocks, F&& fn) {
    run(n_blocks, call<std::remove_reference_t<F>>, &fn, true);
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  template <class G>
  static void call(void* ctx, int64_t task, int thread) { (*static_cast<G*>(ctx))(task, thread); }
  void run(int64_t n_tasks, TaskFn fn, void* ctx, bool shares);
  struct Impl;
  Impl* impl_ = nullptr;
  int n_threads_ = 1;
};

}  // namespace pc
