// Adds the milliseconds a scope took to a counter: the breakdowns of where a request's
// time went (PromptTimings, engine/engine.h). Steady clock; the counter belongs to one
// thread, so no synchronisation.
#pragma once
#include <chrono>

namespace pc {

class ScopedMs {
 public:
  explicit ScopedMs(double& total) : total_(total), t0_(std::chrono::steady_clock::now()) {}
  ~ScopedMs() { total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }
  ScopedMs(const ScopedMs&) = delete;
  ScopedMs& operator=(const ScopedMs&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace pc
