#include "server/job.h"

#include <algorithm>
#include <utility>

namespace pc::server {

Delta Job::wait_delta(std::chrono::milliseconds timeout, bool* done) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return done_ || !pending_.text.empty(); });
  // Text is posted before the end, so `done` comes with the last of it.
  *done = done_;
  return std::exchange(pending_, {});
}

void Job::post_text(const std::string& s) {
  if (s.empty()) return;
  std::vector<TokenLogprobInfo> lps;
  if (req.logprobs >= 0) {
    const size_t n = std::min(stream.released_tokens(logprobs_posted_), logprobs.size());
    for (; logprobs_posted_ < n; ++logprobs_posted_) {
      const size_t i = logprobs_posted_;
      lps.push_back({stream.ids()[i], stream.token_offset(i), logprobs[i]});
    }
  }
  std::lock_guard lk(mu_);
  pending_.text += s;
  for (TokenLogprobInfo& x : lps) pending_.logprobs.push_back(std::move(x));
  cv_.notify_all();
}

void Job::post_done(JobOutcome o) {
  std::lock_guard lk(mu_);
  outcome_ = std::move(o);
  done_ = true;
  cv_.notify_all();
}

}  // namespace pc::server
