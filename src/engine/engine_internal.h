// Engine internals shared by engine.cc and plan_runner.cc.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "kv/page_table.h"
#include "model/forward.h"

namespace pc {

// What the forward pass attends over: a table's pages in order, with their
// fills when some page before the last is partial (PML plans).
SeqKv seq_kv(const PageTable& t, std::vector<int32_t>& pages, std::vector<int32_t>& fills);

// One running request.
struct Engine::Seq {
  using Clock = std::chrono::steady_clock;
  Seq(PagePool& pool, const SamplingParams& sp) : table(pool), sampler(sp) {}
  int64_t id = 0;
  GenerateRequest req;
  TokenCallback on_token;
  KvNamespace ns;
  std::vector<int32_t> tokens;     // prompt, then generated tokens (for PML: the plan's tokens)
  std::vector<int32_t> positions;  // position id of each token
  int32_t n_kv = 0;                // tokens[0, n_kv) have KV in `table`, in table order
  int32_t n_prompt = 0;            // tokens[0, n_prompt) are the prompt
  bool plan = false;               // a PML plan: not a token prefix, never inserted in the index
  int32_t lock_node = -1;          // radix node locked for the reused prefix
  bool promoting = false;          // waiting for a lower tier's lookup (kv_tiers.h)
  PageTable table;
  Sampler sampler;
  GenerateResult result;
  Clock::time_point t_start;
  Clock::time_point t_first;
  bool prompt_done() const { return n_kv >= n_prompt; }
};

}  // namespace pc
