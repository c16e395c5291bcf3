// Tier worker: runs serialization and tier I/O off the engine thread.
//
//   engine thread                         worker thread(s)
//   submit(work, done) ──► job queue ──►  work()            (tier I/O, serialize)
//   poll()             ◄── done queue ◄── (work finished)
//     done(error)
//
// `work` runs on a worker thread and must not touch engine structures (page pool,
// radix index, page tables); it may read KV pages the engine keeps referenced and
// unmodified until `done` runs (pages below their fill are read-only while
// referenced). `done` runs on the thread that calls poll() — the engine thread — so it
// may touch engine structures without locks. Results travel from work to done in
// state both capture (submit_value does that for you).
//
// Destruction stops accepting work, finishes the jobs already queued (so demotions are
// written) and joins; completions not yet polled are dropped.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace pc {

class TierWorker {
 public:
  using Work = std::function<void()>;
  // Called with null on success, or the exception work() threw.
  using Done = std::function<void(std::exception_ptr)>;

  explicit TierWorker(int n_threads = 1);
  ~TierWorker();
  TierWorker(const TierWorker&) = delete;
  TierWorker& operator=(const TierWorker&) = delete;

  // Queues a job; returns its id (1, 2, ...). `done` may be null.
  uint64_t submit(Work work, Done done);

  // Convenience: work returns a value, done receives it (or the exception).
  template <class R>
  uint64_t submit_value(std::function<R()> work, std::function<void(std::optional<R>&, std::exception_ptr)> done) {
    auto result = std::make_shared<std::optional<R>>();
    return submit([result, work = std::move(work)] { result->emplace(work()); },
                  [result, done = std::move(done)](std::exception_ptr e) { done(*result, e); });
  }

  // Runs up to `max` completions on the calling thread; returns how many ran.
  size_t poll(size_t max = SIZE_MAX);
  // Waits up to timeout_ms for a completion to be ready (without running it).
  bool wait_ready(int timeout_ms);
  // Jobs submitted whose completion has not run yet.
  size_t in_flight() const;

 private:
  struct Job {
    uint64_t id;
    Work work;
    Done done;
  };
  struct Completion {
    Done done;
    std::exception_ptr error;
  };
  void loop();

  mutable std::mutex mu_;
  std::condition_variable job_cv_;
  std::condition_variable done_cv_;
  std::deque<Job> jobs_;
  std::deque<Completion> completions_;
  std::vector<std::thread> threads_;
  uint64_t next_id_ = 1;
  size_t in_flight_ = 0;
  bool stop_ = false;
};

}  // namespace pc
