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
#include "server/chat/text_stream.h"

namespace pc::pml {
struct SchemaLayout;
struct PromptPlan;
}  // namespace pc::pml

namespace pc::server {

using Clock = std::chrono::steady_clock;

// One generated token's log-probabilities, as a response reports them.
struct TokenLogprobInfo {
  int32_t id = 0;
  size_t text_offset = 0;  // byte offset of its text in the reply
  TokenLogprobs lp;
};

// What a handler receives at a time: new text and the log-probabilities of the
// tokens it covers (when the request asked for them).
struct Delta {
  std::string text;
  std::vector<TokenLogprobInfo> logprobs;
};

struct JobOutcome {
  GenerateResult result;        // engine numbers (n_prompt, n_cached, timings, tokens)
  FinishReason finish_reason = FinishReason::kNone;  // kStop, kLength, kCancelled or kError
  std::string error;            // when kError
  std::string error_code;       // when kError: "context_length_exceeded" for a request that cannot fit
  std::vector<int32_t> reply_ids;  // ids whose text is the reply (no trailing EOG)
  std::string reply_tail;          // reply text not covered by reply_ids (stop cut a token)
  std::string text;                // the whole reply text (what the client received)
  std::string stop_sequence;       // the stop string that ended it ("" = none)
};

class Job {
 public:
  Job(GenerateRequest req, std::vector<std::string> stops, const Tokenizer& tok)
      : req(std::move(req)), stream(tok, std::move(stops)) {}

  const GenerateRequest req;
  const Clock::time_point created = Clock::now();

  // PML requests run this plan instead of req.prompt (set before submitting).
  std::shared_ptr<const pml::SchemaLayout> schema;
  std::shared_ptr<const pml::PromptPlan> plan;

  // Handler side. Blocks up to `timeout` for new text or the end; returns the new
  // text (maybe "") and sets *done once the job ended (then outcome() is final).
  Delta wait_delta(std::chrono::milliseconds timeout, bool* done);
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  const JobOutcome& outcome() const { return outcome_; }  // after done

  // Engine side (engine thread only).
  TextStream stream;
  int64_t engine_id = -1;
  Clock::time_point last_token;  // for inter-token latency
  Clock::time_point first_token{};  // when the first token came (epoch: none); read after done
  std::vector<TokenLogprobs> logprobs;  // per generated token (req.logprobs >= 0)
  // Posts text the stream released, with the logprobs of the tokens it covers.
  void post_text(const std::string& s);
  void post_done(JobOutcome o);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Delta pending_;
  size_t logprobs_posted_ = 0;  // tokens whose logprobs were posted (engine thread)
  bool done_ = false;
  JobOutcome outcome_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace pc::server
