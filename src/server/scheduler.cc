#include "server/scheduler.h"

#include "common/error.h"
#include "engine/cache_admin.h"
#include "pml/compiled_plan.h"
#include "kv/radix_index.h"
#include "pml/layout.h"
#include "pml/plan.h"
#include "server/metrics.h"

namespace pc::server {

namespace {
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How often the engine thread looks for expired cache entries (POST /v1/cache/ttl);
// an idle server wakes up this often too.
constexpr std::chrono::milliseconds kSweep{250};
}  // namespace

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opt, Metrics& metrics)
    : engine_(engine), opt_(opt), metrics_(metrics) {
  if (opt_.parallel < 1) throw Error("--parallel must be at least 1");
  if (opt_.queue < 0) throw Error("--queue must be >= 0");
  admission_tokens_ = engine_.admission_tokens();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  shutdown();
  thread_.join();
}

int64_t Scheduler::admission_tokens(const std::string& tenant) const {
  if (engine_.tenant_hold_pages() <= 0) return admission_tokens();
  int64_t held = 0;
  {
    std::lock_guard lk(mu_);
    if (auto it = tenant_held_.find(tenant); it != tenant_held_.end()) held = it->second;
  }
  return engine_.tenant_admission_tokens(held);
}

void Scheduler::shutdown() {
  std::lock_guard lk(mu_);
  stop_ = true;
  cv_.notify_all();
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  std::lock_guard lk(mu_);
  if (stop_) return false;
  // A free slot takes the job at once; otherwise it waits in the bounded queue.
  const size_t free_slots = n_running_ < size_t(opt_.parallel) ? opt_.parallel - n_running_ : 0;
  if (queue_.size() >= free_slots + size_t(opt_.queue)) return false;
  queue_.push_back(std::move(job));
  metrics_.set_queue(queue_.size(), n_running_);
  cv_.notify_all();
  return true;
}

void Scheduler::cancel(Job& job) {
  job.cancel();
  std::lock_guard lk(mu_);
  cancel_pending_ = true;
  cv_.notify_all();
}

void Scheduler::call(const std::function<void(Engine&)>& fn) {
  std::mutex m;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr err;
  {
    std::lock_guard lk(mu_);
    if (stop_) throw Error("the server is shutting down");
    tasks_.push_back([&] {
      try {
        fn(engine_);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard l(m);
      done = true;
      done_cv.notify_all();
    });
    cv_.notify_all();
  }
  std::unique_lock l(m);
  done_cv.wait(l, [&] { return done; });
  if (err) std::rethrow_exception(err);
}

size_t Scheduler::queued() const {
  std::lock_guard lk(mu_);
  return queue_.size();
}

size_t Scheduler::running() const {
  std::lock_guard lk(mu_);
  return n_running_;
}

void Scheduler::run_tasks(std::unique_lock<std::mutex>& lk) {
  while (!tasks_.empty()) {
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    task();
    lk.lock();
  }
}

void Scheduler::drop_cancelled(std::unique_lock<std::mutex>& lk) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->cancelled()) {
      JobOutcome o;
      o.finish_reason = FinishReason::kCancelled;
      (*it)->post_done(std::move(o));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  lk.unlock();
  for (auto& [id, job] : running_)
    if (job->cancelled()) engine_.cancel(id);  // finishes now; collected below
  lk.lock();
}

bool Scheduler::on_token(Job& job, int32_t id) {
  const Clock::time_point now = Clock::now();
  if (job.stream.ids().empty()) {
    job.first_token = now;
    metrics_.observe_ttft(std::chrono::duration<double>(now - job.created).count());
  } else {
    metrics_.observe_itl(std::chrono::duration<double>(now - job.last_token).count());
  }
  job.last_token = now;
  if (job.req.logprobs >= 0) {
    const std::span<const TokenLogprobs> lps = engine_.logprobs(job.engine_id);
    if (!lps.empty()) job.logprobs.push_back(lps.back());
  }
  job.post_text(job.stream.push(id));
  return !job.stream.stopped() && !job.cancelled();
}

void Scheduler::admit(std::unique_lock<std::mutex>& lk) {
  while (!queue_.empty() && running_.size() < size_t(opt_.parallel)) {
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    try {
      Job* j = job.get();
      TokenCallback cb = [this, j](int32_t id) { return on_token(*j, id); };
      // A PML plan's missing modules are encoded by the engine's next steps.
      job->engine_id = job->plan ? engine_.add_plan(pml::kv_plan(*job->plan, *job->schema), job->req, std::move(cb))
                                 : engine_.add(job->req, std::move(cb));
      metrics_.observe_queue_wait(seconds_since(job->created));
      running_.emplace(job->engine_id, std::move(job));
    } catch (const std::exception& e) {
      JobOutcome o;
      o.finish_reason = FinishReason::kError;
      o.error = e.what();
      if (dynamic_cast<const ContextLengthError*>(&e)) o.error_code = "context_length_exceeded";
      job->post_done(std::move(o));
    }
    lk.lock();
    n_running_ = running_.size();
  }
}

void Scheduler::end_job(Job& job, const GenerateResult& r) {
  JobOutcome o;
  o.result = r;
  o.error = r.error;
  if (r.finish_reason == FinishReason::kError) {
    o.finish_reason = FinishReason::kError;
  } else if (job.cancelled()) {
    o.finish_reason = FinishReason::kCancelled;
  } else {
    job.post_text(job.stream.finish());
    o.finish_reason = job.stream.stopped() ? FinishReason::kStop : r.finish_reason;
    if (job.stream.stopped()) o.stop_sequence = job.stream.matched_stop();
  }
  o.reply_ids = job.stream.ids_for_text(&o.reply_tail);
  o.text = job.stream.text();
  job.post_done(std::move(o));
}

void Scheduler::collect_finished() {
  for (auto& [id, r] : engine_.take_finished()) {
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    end_job(*it->second, r);
    running_.erase(it);
  }
}

void Scheduler::sweep_expired() {
  const Clock::time_point now = Clock::now();
  if (now - last_sweep_ < kSweep) return;
  last_sweep_ = now;
  engine_.cache().evict_expired(now);
}

void Scheduler::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    run_tasks(lk);
    drop_cancelled(lk);
    collect_finished();
    if (stop_) break;
    sweep_expired();
    engine_.poll_tiers();
    admit(lk);
    n_running_ = running_.size();  // collect_finished may have ended some
    metrics_.set_queue(queue_.size(), running_.size());
    if (running_.empty()) {
      cv_.wait_for(lk, kSweep, [&] { return stop_ || !queue_.empty() || !tasks_.empty() || cancel_pending_; });
      cancel_pending_ = false;
      continue;
    }
    lk.unlock();
    try {
      engine_.step();
    } catch (const std::exception& e) {
      // A failed step leaves no sequence usable: end them all with the error.
      for (auto& [id, job] : running_) {
        JobOutcome o;
        o.finish_reason = FinishReason::kError;
        o.error = std::string("engine step failed: ") + e.what();
        engine_.cancel(id);
        job->post_done(std::move(o));
      }
      running_.clear();
      engine_.take_finished();
    }
    collect_finished();
    const CacheStats cs = engine_.cache().counters();
    metrics_.set_cache(cs);
    admission_tokens_ = engine_.admission_tokens();
    std::map<std::string, int64_t> held;
    if (engine_.tenant_hold_pages() > 0) held = engine_.cache().held_pages_by_tenant();
    lk.lock();
    tenant_held_ = std::move(held);
    n_running_ = running_.size();
  }
  // Shutdown: end everything still running or queued, as cancelled (Engine::cancel
  // alone would end a sequence as a normal stop).
  lk.unlock();
  for (auto& [id, job] : running_) {
    job->cancel();
    engine_.cancel(id);
  }
  collect_finished();
  lk.lock();
  for (auto& job : queue_) {
    JobOutcome o;
    o.finish_reason = FinishReason::kCancelled;
    job->post_done(std::move(o));
  }
  queue_.clear();
}

}  // namespace pc::server
