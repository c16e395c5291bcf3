#include "server/job.h"

#include <utility>

namespace pc::server {

std::string Job::wait_delta(std::chrono::milliseconds timeout, bool* done) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return done_ || !pending_.empty(); });
  // Text is posted before the end, so `done` comes with the last of it.
  *done = done_;
  return std::exchange(pending_, {});
}

void Job::post_text(const std::string& s) {
  if (s.empty()) return;
  std::lock_guard lk(mu_);
  pending_ += s;
  cv_.notify_all();
}

void Job::post_done(JobOutcome o) {
  std::lock_guard lk(mu_);
  outcome_ = std::move(o);
  done_ = true;
  cv_.notify_all();
}

}  // namespace pc::server
