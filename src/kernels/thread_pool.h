// A fixed pool of worker threads for data-parallel loops. The calling thread
// takes part, so ThreadPool(1) runs everything inline. No allocation per call.
#pragma once
#include <cstdint>

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
    run(n_tasks, [](void* ctx, int64_t task, int thread) { (*static_cast<F*>(ctx))(task, thread); },
        &fn);
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t n_tasks, TaskFn fn, void* ctx);
  struct Impl;
  Impl* impl_ = nullptr;
  int n_threads_ = 1;
};

}  // namespace pc
