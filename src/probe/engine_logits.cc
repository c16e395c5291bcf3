#include "probe/engine_logits.h"

#include <algorithm>

#include "common/error.h"
#include "engine/kv_tiers.h"
#include "engine/prefix_cache.h"
#include "engine/sequence.h"
#include "kv/page_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace pc {

// The engine's insides these harnesses use: starting a sequence that keeps its
// logits, and the forward pass and caches for a loop of their own.
struct EngineProbe {
  // Runs a plan to its first sample (max_tokens 0 unless `generate`) and returns the
  // logits there.
  static std::vector<float> run_kept(Engine& e, KvPlan plan, GenerateRequest r, GenerateResult* result) {
    const int64_t id = e.start(std::move(plan), r, nullptr, true);
    GenerateResult got = e.wait(id);
    if (result) *result = std::move(got);
    std::vector<float> out = std::move(e.kept_logits_[id]);
    e.kept_logits_.erase(id);
    return out;
  }

  static std::vector<float> prompt_logits(Engine& e, const std::vector<int32_t>& prompt, int chunk,
                                          bool use_cache, int64_t* n_cached, const CacheScope& scope) {
    if (prompt.empty()) throw Error("the prompt is empty");
    const int64_t V = e.model_.config().n_vocab;
    const KvNamespace space = e.ns(scope);
    RecurrentState state;  // recurrent models: restored from the snapshot a hit ends at
    if (e.model_.config().n_recurrent > 0) state = RecurrentState(e.model_.config());
    PrefixHit hit(*e.pages_);
    if (use_cache) {
      e.prefix_->promote_now(space, prompt);  // this call runs to completion anyway
      hit = e.prefix_->attach(space, prompt, true, state.empty() ? nullptr : &state);
    }
    PageTable& table = hit.table;
    int32_t done = hit.length;
    if (n_cached) *n_cached = done;
    std::vector<float> out;
    out.reserve((prompt.size() - done) * V);
    std::vector<int32_t> ids, fills;
    while (done < int32_t(prompt.size())) {
      const int32_t n = std::min<int32_t>(chunk, int32_t(prompt.size()) - done);
      if (!table.prepare_append(n)) throw Error("out of KV memory");
      SeqKv kv = seq_kv(table, ids, fills);
      if (!state.empty()) kv.state = &state;
      std::vector<BatchEntry> batch;
      for (int32_t t = done; t < done + n; ++t) batch.push_back(BatchEntry{prompt[t], t, 0, t, true});
      const float* l = e.fwd_->run(batch, std::span<const SeqKv>(&kv, 1));
      out.insert(out.end(), l, l + int64_t(n) * V);
      done += n;
    }
    if (use_cache) {
      const PrefixState end{int32_t(prompt.size()), &state};
      const std::span<const PrefixState> states =
          state.empty() ? std::span<const PrefixState>() : std::span<const PrefixState>(&end, 1);
      e.prefix_->insert(space, prompt, table, {}, states);
      if (e.tiers_) {
        TierWrites writes;
        e.prefix_->add_tier_writes(prompt, int32_t(prompt.size()) + 1, states, writes);
        e.tiers_->write(space, prompt, writes);
      }
    }
    return out;
  }
};

std::vector<float> plan_logits(Engine& engine, KvPlan plan, const GenerateRequest& req, GenerateResult* result) {
  GenerateRequest r = req;
  r.max_tokens = 0;  // finishes at its first sample, keeping the logits there
  return EngineProbe::run_kept(engine, std::move(plan), std::move(r), result);
}

std::vector<float> plan_logits(Engine& engine, KvPlan plan, const CacheScope& scope) {
  GenerateRequest req;
  req.scope = scope;
  return plan_logits(engine, std::move(plan), req);
}

std::vector<float> request_logits(Engine& engine, const GenerateRequest& req, GenerateResult* result, bool generate) {
  if (req.prompt.empty()) throw Error("the prompt is empty");
  GenerateRequest r = req;
  if (!generate) r.max_tokens = 0;
  KvPlan plan = KvPlan::prompt(r.prompt);
  plan.blocks = r.blocks;
  return EngineProbe::run_kept(engine, std::move(plan), std::move(r), result);
}

std::vector<float> prompt_logits(Engine& engine, const std::vector<int32_t>& prompt, int chunk, bool use_cache,
                                 int64_t* n_cached, const CacheScope& scope) {
  return EngineProbe::prompt_logits(engine, prompt, chunk, use_cache, n_cached, scope);
}

}  // namespace pc
