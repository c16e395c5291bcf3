// Logits without generation: the measuring harness of the tests and the quality
// benchmarks (bench quality, bench modules). Not part of the engine's product API
// (engine/engine.h): a server never calls these, and the promptcache binary links them
// only for its benchmarks.
//
//   plan_logits(engine, plan, req)   the logits at the end of an assembly plan, the plan
//                                    resolved as add_plan() resolves it
//   request_logits(engine, req)      the same after a request's prompt, as add() plans it
//   prompt_logits(engine, prompt, c) every position's logits, computed in chunks of c
//                                    tokens by a forward loop of its own (batch
//                                    invariance: the rows must not depend on c)
#pragma once
#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "kv/kv_plan.h"

namespace pc {

// Logits at the end of a plan, [n_vocab]; the request's scope and reuse policy apply
// (req.prompt and max_tokens are ignored), its result's counts in *result.
std::vector<float> plan_logits(Engine& engine, KvPlan plan, const GenerateRequest& req,
                               GenerateResult* result = nullptr);
std::vector<float> plan_logits(Engine& engine, KvPlan plan, const CacheScope& scope = {});

// Logits after a request's prompt, [n_vocab], with its result's counts in *result. With
// `generate` the request also generates its max_tokens (result->tokens); else
// max_tokens is ignored.
std::vector<float> request_logits(Engine& engine, const GenerateRequest& req, GenerateResult* result = nullptr,
                                  bool generate = false);

// Logits of every prompt position from the first uncached one on, [n - cached][n_vocab],
// computed in chunks of `chunk` tokens. With use_cache, the longest cached prefix is
// reused (its length in *n_cached) and the prompt is inserted into the prefix cache
// afterwards (written through to the tiers).
std::vector<float> prompt_logits(Engine& engine, const std::vector<int32_t>& prompt, int chunk,
                                 bool use_cache = false, int64_t* n_cached = nullptr, const CacheScope& scope = {});

}  // namespace pc
