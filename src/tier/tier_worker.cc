#include "tier/tier_worker.h"

#include <chrono>
#include <stdexcept>

namespace pc {

TierWorker::TierWorker(int n_threads) {
  if (n_threads < 1) throw std::invalid_argument("TierWorker: n_threads must be at least 1");
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { loop(); });
}

TierWorker::~TierWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  job_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

uint64_t TierWorker::submit(Work work, Done done) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw std::logic_error("TierWorker: submit after shutdown");
    id = next_id_++;
    jobs_.push_back(Job{id, std::move(work), std::move(done)});
    ++in_flight_;
  }
  job_cv_.notify_one();
  return id;
}

void TierWorker::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      job_cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_ and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::exception_ptr error;
    try {
      if (job.work) job.work();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      completions_.push_back(Completion{std::move(job.done), error});
    }
    done_cv_.notify_all();
  }
}

size_t TierWorker::poll(size_t max) {
  std::vector<Completion> batch;  // allocates only when something completed
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (completions_.empty()) return 0;
    while (!completions_.empty() && batch.size() < max) {
      batch.push_back(std::move(completions_.front()));
      completions_.pop_front();
    }
    in_flight_ -= batch.size();
  }
  // Outside the lock: a completion may submit more work (or poll again).
  for (Completion& c : batch)
    if (c.done) c.done(c.error);
  return batch.size();
}

bool TierWorker::wait_ready(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return !completions_.empty(); });
}

size_t TierWorker::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

}  // namespace pc
