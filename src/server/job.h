// One generation request as it travels between an HTTP handler thread and the
// engine thread.
//
//   handler thread                       engine thread
//   ──────────────                       ─────────────
//   make Job, Scheduler::submit ───────► queue → engine.add (when a slot is free)
//   wait_delta() ◄──── text deltas ───── token callback (TextStream: stops, UTF-8)
//   cancel() (client gone) ────────────► engine.cancel, pages released
//   wait_delta() ◄──── done + result ─── take_finished()
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/text_stream.h"

namespace pc::server {

using Clock = std::chrono::steady_clock;

struct JobOutcome {
  GenerateResult result;        // engine numbers (n_prompt, n_cached, timings, tokens)
  std::string finish_reason;    // "stop", "length", "cancelled" or "error"
  std::string error;            // when "error"
  std::vector<int32_t> reply_ids;  // ids whose text is the reply (no trailing EOG)
  std::string reply_tail;          // reply text not covered by reply_ids (stop cut a token)
  std::string text;                // the whole reply text (what the client received)
};

class Job {
 public:
  Job(GenerateRequest req, std::vector<std::string> stops, const Tokenizer& tok)
      : req(std::move(req)), stream(tok, std::move(stops)) {}

  const GenerateRequest req;
  const Clock::time_point created = Clock::now();

  // Handler side. Blocks up to `timeout` for new text or the end; returns the new
  // text (maybe "") and sets *done once the job ended (then outcome() is final).
  std::string wait_delta(std::chrono::milliseconds timeout, bool* done);
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  const JobOutcome& outcome() const { return outcome_; }  // after done

  // Engine side (engine thread only).
  TextStream stream;
  int64_t engine_id = -1;
  Clock::time_point last_token;  // for inter-token latency
  void post_text(const std::string& s);
  void post_done(JobOutcome o);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  JobOutcome outcome_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace pc::server
