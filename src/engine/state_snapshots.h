// The recurrent-state snapshots one sequence takes (hybrid models): where it takes
// them, the copies it holds until it publishes its prefix, and what it publishes.
//
//   prompt   [ system+tools ][ user ][ assistant ][ tool result ][ gen ] reply ...
//   at            ^ block ends and begins (KvPlan::blocks)   ^ end of prompt   ^ end
//                                                             (and one before)
//                                                                    (n_prompt)   (n_kv at
//                                                                                  finish)
//
// Positions are token counts: a snapshot at p is the state after tokens [0, p). Block
// boundaries and the end of the prompt are captured inside the forward pass that
// computes the token before them (SeqKv::captures); the end of what was computed (the
// end of the reply, or where a preempted sequence stopped) is the sequence's own state.
// At most `max_kept` are published per sequence, the latest first kept: the next
// request is most likely to diverge near the end of this one.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/prefix_cache.h"
#include "kv/kv_plan.h"
#include "model/config.h"
#include "model/recurrent_state.h"

namespace pc {

class SequenceSnapshots {
 public:
  // The positions to capture: the begin and end of every block in (0, n_prompt],
  // n_prompt and n_prompt - 1 (where a repeat of the prompt resumes).
  void plan(const KvPlan& plan, int32_t n_prompt, int32_t max_kept);
  // Captures for the tokens [first, first + count) a pass computes (positions in
  // (first, first + count]): appended to `out`, each into a new state held here.
  void captures(const ModelConfig& c, int32_t first, int32_t count, std::vector<StateCapture>& out);
  // After the pass: keeps the latest max_kept captures (earlier ones are dropped).
  void trim();
  // What to publish with the prefix tokens [0, n_kv): the captures, then `current`
  // (the state after n_kv tokens), the latest max_kept of them.
  std::vector<PrefixState> to_publish(const RecurrentState& current, int32_t n_kv) const;
  // Published (or given up): the captures go.
  void clear() { captured_.clear(); }
  int32_t n_captured() const { return int32_t(captured_.size()); }

 private:
  struct Captured {
    int32_t at = 0;
    RecurrentState state;
  };
  std::vector<int32_t> at_;        // sorted, distinct
  std::deque<Captured> captured_;  // by position; a deque keeps the states in place
  int32_t max_kept_ = 16;
};

}  // namespace pc
