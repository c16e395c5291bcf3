// The engine thread: owns the Engine, admits queued jobs up to `parallel`
// running sequences (continuous batching: every Engine::step() advances all of
// them), cancels jobs whose client went away, and runs short tasks (cache admin,
// stats) between steps so that the engine and the KV structures need no locks.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "server/job.h"

namespace pc::server {

class Metrics;

struct SchedulerOptions {
  int parallel = 4;    // sequences running at once
  int queue = 64;      // jobs waiting for a slot; more are refused
};

class Scheduler {
 public:
  Scheduler(Engine& engine, const SchedulerOptions& opt, Metrics& metrics);
  ~Scheduler();  // shutdown(), then joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Stops the engine thread: queued and running jobs end as "cancelled", later
  // submit() and call() fail. Returns without waiting.
  void shutdown();
  // Queues a job. False when the queue is full (the caller answers 503).
  bool submit(std::shared_ptr<Job> job);
  // Marks a job cancelled (client gone); its sequence ends and its pages are freed.
  void cancel(Job& job);
  // Runs fn on the engine thread between steps and waits for it; rethrows its exception.
  void call(const std::function<void(Engine&)>& fn);

  size_t queued() const;
  size_t running() const;
  // Tokens (prompt + max_tokens) a request may need to be admitted: the KV capacity
  // besides pinned entries (Engine::admission_tokens), as of the last step.
  int64_t admission_tokens() const { return admission_tokens_.load(); }
  // What one API tenant (CacheScope::tenant) is promised: with a
  // per-tenant bound (--tenant-kv-share), the capacity less the other tenants' full
  // bounds and this tenant's own pins and retained prefixes (as of the last step), so
  // no other tenant's use shows in it; otherwise admission_tokens().
  int64_t admission_tokens(const std::string& tenant) const;

 private:
  void loop();
  void run_tasks(std::unique_lock<std::mutex>& lk);
  void admit(std::unique_lock<std::mutex>& lk);
  void drop_cancelled(std::unique_lock<std::mutex>& lk);
  void collect_finished();
  void sweep_expired();  // drops cache entries whose TTL passed, every kSweep at most
  bool on_token(Job& job, int32_t id);
  void end_job(Job& job, const GenerateResult& r);

  Engine& engine_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::function<void()>> tasks_;
  std::map<int64_t, std::shared_ptr<Job>> running_;  // by engine id; engine thread only
  size_t n_running_ = 0;                              // mirror of running_.size() under mu_
  std::atomic<int64_t> admission_tokens_{0};
  std::map<std::string, int64_t> tenant_held_;  // under mu_: CacheAdmin::held_pages_by_tenant
  bool stop_ = false;
  bool cancel_pending_ = false;  // a queued job may have been cancelled
  Clock::time_point last_sweep_;
  std::thread thread_;
};

}  // namespace pc::server
