// The check pass of the scoring recompute policies (deviation, impact;
// engine/approximate/recompute_policy.h): how far each candidate token's reused layer-1
// K/V lies from what it would be in this prompt.
//
// Every token up to the end of the last candidate (impact: up to the prompt's end) that
// has no exact KV yet — the candidates and the runs to compute — is run through layer 0
// in a scratch table laid out as the sequence will be, the prefix and exact KV attached
// where the sequence has them, so each token's layer 0 attends to exactly the context it
// will have (Forward::run_to_layer). The scratch pages are released at the end.
//
// Scores, per candidate token and KV head g: dev[g] = |K1 - K1'|² + |V1 - V1'|² (fresh vs
// reused layer-1 K/V, F16 as stored). deviation sums dev over the KV heads; impact
// weights each query head's dev by the attention a[h] of the prompt's last token at
// layer 1 (Forward::attention_weights: its fresh query over every token's fresh or exact
// layer-1 key), summed over query heads: a token matters as much as the next-token
// prediction looks at it.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/approximate/recompute_policy.h"
#include "engine/engine.h"

namespace pc {

class Forward;
class PagePool;

// scores[i][j]: token j of candidate i. The candidates' KV is read from `src` with K
// rotated by their `shift` (as relocated_copy rotates it, without copying pages);
// s.runs holds the rest of the prompt, in order. Adds the tokens run
// through layer 0 to *n_checked and its time to `timings`. False when the pool has no pages for the scratch table.
bool check_pass(Forward& fwd, PagePool& pages, int max_batch_tokens, const Engine::Seq& s,
                const std::vector<ReuseCandidate>& cands, std::vector<std::vector<float>>& scores,
                int64_t* n_checked, PromptTimings& timings);

}  // namespace pc
