// One sequence the engine runs: a request, or the encoding of a module.
//
//   tokens     [ assembled prompt .................... | generated ... ]
//   runs       [ cached ][ compute ][ cached ][ compute ]                 (prompt only)
//   n_kv       tokens[0, n_kv) have KV in `table`, in table (= attention) order
//
// A sequence moves through these states:
//
//   kPromoting ──► kWaiting ──► kRunning ──► finished
//   (tier lookup)  (modules      │   ▲
//                  not ready)    ▼   │ resumed (assembled again: a prefix hit)
//                               kParked (preempted; KV published, pages released)
//
// Ownership: `table` holds sequence references on every page it attends over,
// `hold` on module pages the runs will attach later in the prompt, `lease` locks the
// reused radix path. Preemption and finishing release all three; nothing else in the
// engine keeps pages on a sequence's behalf.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "grammar/matcher.h"
#include "engine/prefix_cache.h"
#include "engine/state_snapshots.h"
#include "kv/module_store.h"
#include "kv/page_table.h"
#include "model/forward.h"
#include "model/recurrent_state.h"

namespace pc {

// A stretch of the assembled prompt: tokens [begin, end) of Seq::tokens.
struct Run {
  bool cached = false;            // KV taken from a cache (pages), else computed
  int32_t begin = 0, end = 0;
  std::vector<PageEntry> pages;   // cached: the KV, attached by reference
  bool fresh_page = false;        // computed: starts on a fresh page (a module segment)
  bool attached = false;          // cached: already in the table (a prefix hit)
  int32_t first_entry = -1;       // fresh_page: the table entry it starts at, once begun
  // cached, when `copied` is non-empty (approximate reuse) instead of `pages`: the KV
  // of tokens [begin, end), in order, computed `shift` positions earlier, copied into
  // the table's own pages when the run is reached (relocated_copy: packed after the
  // tokens before it, K rotated), so that the table stays aligned and attention visits
  // full blocks of 8 slots. The sequence's `hold` keeps the source pages.
  std::vector<PageSlice> copied;
  int32_t shift = 0;
};

// A run of tokens [begin, end), cached or to compute, its other fields default.
inline Run make_run(bool cached, int32_t begin, int32_t end) {
  Run r;
  r.cached = cached;
  r.begin = begin;
  r.end = end;
  return r;
}

// What the forward pass attends over: a table's pages in order, with their fills when
// some page before the last is partial (assembled plans).
SeqKv seq_kv(const PageTable& t, std::vector<int32_t>& pages, std::vector<int32_t>& fills);

struct Engine::Seq {
  using Clock = std::chrono::steady_clock;
  enum class State { kPromoting, kWaiting, kRunning, kParked };
  enum class Kind { kRequest, kEncode };

  Seq(PagePool& pool, const SamplingParams& sp) : table(pool), hold(pool), sampler(sp) {}
  int64_t id = 0;
  Kind kind = Kind::kRequest;
  State state = State::kWaiting;
  GenerateRequest req;
  TokenCallback on_token;
  KvNamespace ns;
  KvPlan plan;                     // what the prompt is assembled from (kept to reassemble)
  bool prefix_plan = false;        // plan.is_prefix(): published in the prefix cache
  bool approximate = false;        // holds approximately reused KV: never published
  std::vector<int32_t> tokens;     // assembled prompt, then generated tokens
  std::vector<int32_t> positions;  // position id of each token
  int32_t n_prompt = 0;            // tokens[0, n_prompt) are the prompt
  int32_t n_kv = 0;
  std::vector<Run> runs;
  size_t run = 0;                  // the run n_kv is in
  PageTable table;
  PageTable hold;
  // Models with recurrent layers: the state after tokens[0, n_kv) (restored from the
  // snapshot a prefix hit ends at, or reset with the table). Empty otherwise.
  RecurrentState recurrent;
  SequenceSnapshots snapshots;     // recurrent models: the resume points it stores
  PrefixLease lease;
  Sampler sampler;
  std::unique_ptr<grammar::Matcher> matcher;  // req.grammar's place after the generated tokens
  GenerateResult result;
  bool assembled_once = false;     // the first assembly counted the request's reuse
  bool keep_logits = false;        // probe/engine_logits.h: keep the last prompt position's logits
  std::vector<float> logits;
  std::vector<int32_t> encoded_by_me;  // modules this request had encoded (misses)
  // Approximate reuse: blocks restored from the KV tiers (not in memory's block index),
  // their KV at positions 0..n-1; looked up once, before the first assembly.
  struct TierBlock {
    int32_t begin = 0;  // where the block sits in `tokens`
    PageTable kv;
  };
  std::vector<TierBlock> tier_blocks;
  bool tier_blocks_fetched = false;
  // kEncode: the module (index into plan.modules) and the request it was started for.
  int32_t module = -1;
  int64_t owner = 0;
  Clock::time_point t_start;
  Clock::time_point t_first;

  bool prompt_done() const { return n_kv >= n_prompt; }
  bool wants_logits() const { return kind == Kind::kRequest; }
  const ModuleSpec& spec(int32_t m) const { return (*plan.modules)[m]; }
};

}  // namespace pc
