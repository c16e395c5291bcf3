#include "engine/approximate/approximate_reuse.h"

#include <algorithm>

#include "engine/approximate/approximate_namespace.h"
#include "common/stopwatch.h"
#include "engine/approximate/check_pass.h"
#include "engine/prefix_cache.h"
#include "engine/relocation.h"
#include "engine/sequence.h"

namespace pc {

bool ApproximateReuse::assemble(Seq& s, int32_t exact, std::vector<ReuseCandidate> modules) {
  if (s.prefix_plan) return assemble_blocks(s, exact);
  return modules.empty() || apply_recompute(s, modules);
}

namespace {

// The slots of tokens [begin, end) of `slices` (which cover tokens 0, 1, ... in order).
std::vector<PageSlice> cut_slices(std::span<const PageSlice> slices, int32_t begin, int32_t end) {
  std::vector<PageSlice> out;
  int32_t at = 0;
  for (const PageSlice& sl : slices) {
    const int32_t lo = std::max(begin, at), hi = std::min(end, at + sl.size());
    if (lo < hi) out.push_back({sl.page, sl.begin + (lo - at), sl.begin + (hi - at)});
    at += sl.size();
    if (at >= end) break;
  }
  return out;
}

// Sequence references on the pages of `slices` (in s.hold, until the sequence lets go),
// so that nothing evicts them before the runs that copy from them are reached.
void hold_slices(Engine::Seq& s, std::span<const PageSlice> slices) {
  std::vector<PageEntry> held;
  for (const PageSlice& sl : slices) held.push_back({sl.page, sl.end});
  s.hold.attach(held);
}

}  // namespace

void ApproximateReuse::continue_approximate(Seq& s, int32_t* t) {
  if (!s.req.reuse.continue_approximate || s.req.reuse.budget >= 1.0) return;
  PrefixCache::Peek m;
  {
    ScopedMs timer(s.result.timings.lookup_ms);
    m = prefix_.peek(approximate_ns(s.ns), s.tokens, int32_t(s.tokens.size()) - 1);
  }
  if (m.length <= *t) return;
  // The path is an aligned table (token i in page i / P, slot i % P): its pages from the
  // first page boundary at or after *t on are taken by reference; the tokens before that
  // boundary share a page with tokens the request has from elsewhere, so they are copied
  // (into the sequence's table after the exact prefix, which keeps the table aligned).
  // s.hold keeps the path's pages once the lease ends.
  const int32_t P = pages_.page_size();
  const int32_t edge = std::min(m.length, (*t + P - 1) / P * P);
  if (edge > *t) {
    Run r = make_run(true, *t, edge);
    r.copied = cut_slices(m.slices, *t, edge);
    hold_slices(s, r.copied);
    s.runs.push_back(std::move(r));
  }
  if (m.length > edge) {
    const PageTable path = PageTable::from_slices(pages_, m.slices);
    Run r = make_run(true, edge, m.length);
    r.pages.assign(path.entries().begin() + edge / P, path.entries().end());
    s.hold.attach(r.pages);
    s.runs.push_back(std::move(r));
  }
  *t = m.length;
}

// After the exact prefix [0, exact): each later block found in the block index at
// another position is a candidate (its KV moved to where it sits now); everything else
// is computed. The prompt's last token is always computed: it produces the logits.
bool ApproximateReuse::assemble_blocks(Seq& s, int32_t exact) {
  std::vector<ReuseCandidate> cands;
  int32_t t = exact;
  // An earlier approximate request's KV first; it went through a policy already, so it is
  // no candidate.
  continue_approximate(s, &t);
  const int32_t continued = t - exact;
  const int32_t n = int32_t(s.tokens.size());
  const bool report = s.req.reuse.report_blocks && !s.assembled_once;
  if (report) s.result.blocks.clear();
  auto note = [&](const KvBlock& b, BlockReuse::Source src) {
    if (report) s.result.blocks.push_back({b.begin, b.end, src});
  };
  for (const KvBlock& b : s.plan.blocks) {
    // A block the exact prefix covers in part is reused from where the prefix ends.
    if (b.end <= t || b.end > n || b.begin >= b.end) {
      note(b, b.end <= exact ? BlockReuse::Source::kExact : b.end <= t ? BlockReuse::Source::kContinued
                                                                       : BlockReuse::Source::kMissed);
      continue;
    }
    std::optional<BlockHit> hit = find_block(s, b);
    note(b, hit ? BlockReuse::Source::kFound : BlockReuse::Source::kMissed);
    if (!hit) continue;
    const int32_t end = std::min(b.end, n - 1);
    const int32_t lo = std::max(b.begin, t);
    if (end <= lo) continue;
    if (lo > t) s.runs.push_back(make_run(false, t, lo));
    cands.push_back(ReuseCandidate{lo, end, sub_slices(hit->slices, lo - b.begin, end - lo), b.begin - hit->position});
    hold_slices(s, cands.back().src);  // the index's pages: copies and the check pass allocate, which may evict
    t = end;
  }
  if (t < n) s.runs.push_back(make_run(false, t, n));
  if (!apply_recompute(s, cands)) return false;
  if (continued > 0) {
    s.approximate = true;
    if (!s.assembled_once) s.result.n_approximate += continued;
  }
  return true;
}

std::optional<BlockHit> ApproximateReuse::find_block(Seq& s, const KvBlock& b) {
  ScopedMs timer(s.result.timings.lookup_ms);
  const std::span<const int32_t> toks(s.tokens.data() + b.begin, size_t(b.end - b.begin));
  if (std::optional<BlockHit> hit = prefix_.block_hit(s.ns, toks)) return hit;
  // Blocks an approximate request computed (after approximately reused KV): only
  // approximate requests come here.
  if (std::optional<BlockHit> hit = prefix_.block_hit(approximate_ns(s.ns), toks)) return hit;
  for (const Seq::TierBlock& t : s.tier_blocks) {
    if (t.begin != b.begin || t.kv.n_tokens() != b.end - b.begin) continue;
    BlockHit hit;  // position 0: tier entries hold K rotated there
    for (const PageEntry& e : t.kv.entries()) hit.slices.push_back({e.page, 0, e.filled});
    return hit;
  }
  return std::nullopt;
}

bool ApproximateReuse::apply_recompute(Seq& s, std::vector<ReuseCandidate>& cands) {
  const ReusePolicy& p = s.req.reuse;
  const double budget = std::clamp(p.budget, 0.0, 1.0);
  int64_t total = 0;
  for (const ReuseCandidate& c : cands) total += c.size();
  RecomputeMasks masks;
  int64_t checked = 0;
  const int64_t k = budget_tokens(cands, budget);
  if (p.policy != RecomputePolicy::kPrefix && k > 0 && k < total) {
    std::vector<std::vector<float>> scores;
    if (!check_pass(fwd_, pages_, max_batch_tokens_, s, cands, scores, &checked, s.result.timings)) return false;
    ScopedMs timer(s.result.timings.select_ms);
    masks = select_by_score(cands, scores, budget, p.run);
  } else {
    // kPrefix; or a scoring policy with nothing to choose (no token, or all): no check.
    masks = select_prefix(cands, p.policy == RecomputePolicy::kPrefix ? budget : k > 0 ? 1.0 : 0.0);
  }
  // Merge the candidates, as computed and reused runs, into the runs in prompt order.
  std::vector<Run> runs;
  auto compute = [&](int32_t b, int32_t e) {
    if (!runs.empty() && !runs.back().cached && !runs.back().fresh_page && runs.back().end == b)
      runs.back().end = e;
    else
      runs.push_back(make_run(false, b, e));
  };
  int64_t approx = 0, recomputed = 0;
  size_t ci = 0;
  auto emit = [&](size_t i) {
    const ReuseCandidate& c = cands[i];
    const std::vector<uint8_t>& m = masks[i];
    for (int32_t a = 0; a < c.size();) {
      int32_t b = a;
      while (b < c.size() && m[size_t(b)] == m[size_t(a)]) ++b;
      if (m[size_t(a)]) {
        compute(c.begin + a, c.begin + b);
        recomputed += b - a;
      } else {
        // Copied into the sequence's table when the run is reached (Run::copied).
        Run r = make_run(true, c.begin + a, c.begin + b);
        r.copied = sub_slices(c.src, a, b - a);
        r.shift = c.shift;
        runs.push_back(std::move(r));
        approx += b - a;
      }
      a = b;
    }
  };
  for (Run& r : s.runs) {
    for (; ci < cands.size() && cands[ci].begin < r.begin; ++ci) emit(ci);
    if (r.cached)
      runs.push_back(std::move(r));
    else
      compute(r.begin, r.end);
  }
  for (; ci < cands.size(); ++ci) emit(ci);
  s.runs = std::move(runs);
  s.approximate = approx > 0;
  if (!s.assembled_once) {
    s.result.n_approximate = approx;
    s.result.n_recomputed = recomputed;
    s.result.n_checked = checked;
  }
  return true;
}

void ApproximateReuse::publish(Seq& s) {
  // The radix index takes aligned tables (every page full but the last): keep the full
  // pages the table starts with, copy the rest packed after them.
  const auto entries = s.table.entries();
  const int32_t P = pages_.page_size();
  size_t head = 0;
  while (head + 1 < entries.size() && entries[head].filled == P) ++head;
  if (head + 1 == entries.size() || entries.empty()) {
    prefix_.insert(approximate_ns(s.ns), std::span<const int32_t>(s.tokens.data(), s.n_kv), s.table, s.plan.blocks);
    return;
  }
  PageTable pub(pages_);
  pub.attach(entries.first(head));
  std::vector<PageSlice> rest;
  for (size_t i = head; i < entries.size(); ++i) rest.push_back({entries[i].page, 0, entries[i].filled});
  if (!relocated_copy(pages_, model_, rest, 0, pub)) return;  // no pages left: not published
  if (pub.n_tokens() != s.n_kv) return;
  prefix_.insert(approximate_ns(s.ns), std::span<const int32_t>(s.tokens.data(), s.n_kv), pub, s.plan.blocks);
}

}  // namespace pc
