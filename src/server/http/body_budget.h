// The memory that request bodies hold together (--max-body-memory), counted as their
// buffers are allocated. A body's buffer is granted when its bytes arrive: 64 KiB (or
// less) first, then, once it sends more, its whole length (http_request_reader.h) — so a
// client that declares a large Content-Length and sends nothing holds nothing, and no
// body waits while holding part of what it needs. I/O thread only.
//
//   0 ─────────────── cap - cap/8 ───────── cap
//   │ any body's buffer  │ buffers of ≤ 64 KiB only │
//
// A growing body asks for its new buffer whole (`want`) while it still holds the old
// one (`held`, given back once the bytes are moved), so the count covers the moment
// both exist. A body whose buffer does not fit waits; big ones in turn, first come
// first served, small ones whenever they fit. With nothing else held, a body gets what
// it asks even past the cap (one body larger than it is read alone).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace pc::server {

class BodyBudgetWaiter {
 public:
  virtual ~BodyBudgetWaiter() = default;
  virtual bool waiting_budget() const = 0;  // false: it no longer wants the grant
  // `want` bytes are now taken for it.
  virtual void budget_granted(int64_t want) = 0;
};

class BodyBudget {
 public:
  static constexpr int64_t kSmallBuffer = 64 << 10;

  explicit BodyBudget(int64_t cap) : cap_(cap) {}
  // Takes `want` bytes for a body that holds `held` if they fit and no big buffer
  // waits before it.
  bool take(int64_t want, int64_t held);
  // Queues a body that take() refused; budget_granted() runs once it fits.
  void wait(std::weak_ptr<BodyBudgetWaiter> w, int64_t want, int64_t held);
  void give(int64_t n);
  int64_t used() const { return used_; }

 private:
  struct Waiter {
    std::weak_ptr<BodyBudgetWaiter> who;
    int64_t want, held;
  };
  bool fits(int64_t want, int64_t held) const;
  bool big_waiting();
  void grant_waiters();

  int64_t cap_;
  int64_t used_ = 0;
  std::vector<Waiter> waiters_;  // in arrival order
  bool granting_ = false, again_ = false;
};

}  // namespace pc::server
