// Recompute policies of approximate reuse: which tokens of reused KV to compute again.
//
// Assembly (engine/assembly.cc) lays a prompt out as runs of exact KV, tokens to compute
// and *candidates*: stretches whose KV is cached but was computed in another context (a
// block at another position, a PML module that did not see the modules before it). The
// policy marks the candidate tokens to recompute; assembly turns each candidate into
// alternating computed runs (the marked tokens, attending to everything before them)
// and reused runs (the rest, K rotated to their new positions).
//
//   policy      what it recomputes                                   extra cost
//   prefix      the first ceil(budget × length) tokens of each       none
//               candidate (EPIC-style: a block's first tokens carry
//               most of the attention across its new boundary)
//   deviation   the budget share of all candidate tokens whose       one pass of layer 0
//               layer-1 K/V deviate most from the KV they would      over the tokens from
//               have in this prompt (CacheBlend-style), grouped in   the first candidate
//               runs of `run` tokens                                 to the last
//
// The scoring policies read each candidate token's deviation from the check pass
// (engine/approximate/check_pass.h).
//
// Budget 1 marks every candidate token: the prompt is then computed as a whole, bitwise
// the exact result (and the check is skipped).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/page_pool.h"

namespace pc {

// "prefix" / "deviation"; nullopt for anything else.
std::optional<RecomputePolicy> parse_recompute_policy(const std::string& name);
const char* recompute_policy_name(RecomputePolicy p);

// Tokens [begin, end) of a sequence whose KV is cached but was computed in another
// context: `src` holds it in token order, computed `shift` positions earlier than the
// tokens sit now (K is rotated by `shift` when reused).
struct ReuseCandidate {
  int32_t begin = 0, end = 0;
  std::vector<PageSlice> src;
  int32_t shift = 0;
  int32_t size() const { return end - begin; }
};

// Per candidate, per token: 1 = recompute. masks[i].size() == candidates[i].size().
using RecomputeMasks = std::vector<std::vector<uint8_t>>;

// prefix: the first ceil(budget × size) tokens of each candidate.
RecomputeMasks select_prefix(std::span<const ReuseCandidate> cands, double budget);

// Tokens recomputed in all at `budget`: ceil(budget × total candidate tokens).
int64_t budget_tokens(std::span<const ReuseCandidate> cands, double budget);

// deviation: exactly budget_tokens() tokens, taken in windows of `run` tokens (aligned
// to each candidate's start; a candidate's last window may be shorter) by their mean
// score, highest first, ties to the earlier window; the last window taken is cut at its
// start to fit the budget. scores[i][j] belongs to token j of candidate i.
RecomputeMasks select_by_score(std::span<const ReuseCandidate> cands, const std::vector<std::vector<float>>& scores,
                               double budget, int32_t run);

// The sub-slices of `src` (slices in token order) covering tokens [skip, skip + take).
std::vector<PageSlice> sub_slices(std::span<const PageSlice> src, int32_t skip, int32_t take);

}  // namespace pc
