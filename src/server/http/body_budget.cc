#include "server/http/body_budget.h"

namespace pc::server {

bool BodyBudget::fits(int64_t want, int64_t held) const {
  if (used_ == held) return true;  // nothing else held
  const int64_t cap = want <= kSmallBuffer ? cap_ : cap_ - cap_ / 8;
  return used_ + want <= cap;
}

bool BodyBudget::big_waiting() {
  for (const Waiter& w : waiters_)
    if (w.want > kSmallBuffer && !w.who.expired()) return true;
  return false;
}

bool BodyBudget::take(int64_t want, int64_t held) {
  if (want > kSmallBuffer && big_waiting()) return false;
  if (!fits(want, held)) return false;
  used_ += want;
  return true;
}

void BodyBudget::wait(std::weak_ptr<BodyBudgetWaiter> w, int64_t want, int64_t held) {
  waiters_.push_back({std::move(w), want, held});
}

void BodyBudget::give(int64_t n) {
  used_ -= n;
  grant_waiters();
}

// A grant runs the waiter's parsing, which may give or take again: the nested call
// only asks the running scan to start over.
void BodyBudget::grant_waiters() {
  if (granting_) {
    again_ = true;
    return;
  }
  granting_ = true;
  do {
    again_ = false;
    bool big_blocked = false;
    for (size_t i = 0; i < waiters_.size() && !again_;) {
      const Waiter w = waiters_[i];
      auto who = w.who.lock();
      if (!who || !who->waiting_budget()) {
        waiters_.erase(waiters_.begin() + i);
        continue;
      }
      const bool big = w.want > kSmallBuffer;
      if ((big && big_blocked) || !fits(w.want, w.held)) {
        big_blocked |= big;
        ++i;
        continue;
      }
      used_ += w.want;
      waiters_.erase(waiters_.begin() + i);
      who->budget_granted(w.want);
      again_ = true;  // the grant may have changed what fits
    }
  } while (again_);
  granting_ = false;
}

}  // namespace pc::server
