#include "engine/approximate/check_pass.h"

#include <algorithm>
#include <optional>

#include "common/stopwatch.h"
#include "engine/relocation.h"
#include "engine/sequence.h"
#include "gguf/quants.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/rope_shift.h"

namespace pc {

bool check_pass(Forward& fwd, PagePool& pages, int max_batch_tokens, const Engine::Seq& s,
                const std::vector<ReuseCandidate>& cands, std::vector<std::vector<float>>& scores,
                int64_t* n_checked, PromptTimings& timings) {
  scores.assign(cands.size(), {});
  for (size_t i = 0; i < cands.size(); ++i) scores[i].assign(size_t(cands[i].size()), 0.f);
  const ModelConfig& c = fwd.model().config();
  if (cands.empty() || c.n_layer < 2) return true;  // one layer: rotated KV is exact
  constexpr int kCheckLayer = 1;
  const bool weighted = s.req.reuse.policy == RecomputePolicy::kImpact;
  const int hd = int(c.head_dim), n_kv = int(c.n_kv_head), n_head = int(c.n_head);
  const int64_t kvd = int64_t(n_kv) * hd;
  const KvType kv_type = pages.shape().kv_type;
  const int32_t n = int32_t(s.tokens.size());
  const int32_t to = weighted ? n : cands.back().end;

  std::vector<float> dev;       // impact: [candidate tokens in order][n_kv]
  std::vector<int32_t> slot_of; // impact: [candidate tokens in order] the token's scratch slot
  std::vector<float> q_last;    // impact: [n_head * hd]
  std::vector<float> kr(static_cast<size_t>(kvd)), vr(static_cast<size_t>(kvd));  // one token's reused layer-1 K/V
  std::optional<KeyShift> rot;  // the rotation of the candidate being scored

  PageTable scratch(pages);
  std::vector<int32_t> pg, fills;
  std::vector<float> fresh_k, fresh_v;  // layer-1 K/V as stored
  std::vector<float> q;
  std::vector<BatchEntry> batch;
  // Tokens [b, e) of candidate `cand` (-1: context for the candidates' layer 0), queued in
  // prompt order and run through layer 0 together, max_batch_tokens a forward step
  // whatever the candidate boundaries (a token's K/V does not depend on its batch).
  struct Segment {
    int32_t b, e;
    int cand;
  };
  std::vector<Segment> queue, pieces;
  // The deviations of the candidate tokens [at, at + m) of `cand`, rows j0... of this step.
  auto score = [&](int cand, int32_t at, int32_t m, int32_t j0, int32_t slot0) {
    ScopedMs timer(timings.check_score_ms);
    const ReuseCandidate& rc = cands[size_t(cand)];
    // The reused layer-1 KV of these tokens: slices of rc.src in token order, K
    // rotated by rc.shift as the copy of it in the sequence will be.
    if (rc.shift != 0 && (!rot || rot->shift() != rc.shift)) rot.emplace(fwd.model(), rc.shift);
    const std::vector<PageSlice> mine = sub_slices(rc.src, at - rc.begin, m);
    int32_t j = j0;
    for (const PageSlice& sl : mine) {
      for (int32_t slot = sl.begin; slot < sl.end; ++slot, ++j) {
        fwd.slot_kv(kCheckLayer, sl.page, slot, kr.data(), vr.data());
        if (rc.shift != 0) rot->rotate(kCheckLayer, kr.data(), n_kv, kv_type);
        double total = 0;
        for (int g = 0; g < n_kv; ++g) {
          const float* kf = fresh_k.data() + j * kvd + g * hd;
          const float* vf = fresh_v.data() + j * kvd + g * hd;
          const float* kh = kr.data() + g * hd;
          const float* vh = vr.data() + g * hd;
          double d2 = 0;
          for (int d = 0; d < hd; ++d) {
            const double dk = double(kf[d]) - kh[d];
            const double dv = double(vf[d]) - vh[d];
            d2 += dk * dk + dv * dv;
          }
          total += d2;
          if (weighted) dev.push_back(float(d2));
        }
        scores[size_t(cand)][size_t(at - rc.begin + (j - j0))] = float(total);
        if (weighted) slot_of.push_back(slot0 + j);
      }
    }
  };
  // Runs the queue: steps of up to max_batch_tokens tokens appended to the scratch table.
  auto run_queue = [&]() -> bool {
    size_t qi = 0;
    int32_t at = queue.empty() ? 0 : queue[0].b;
    while (qi < queue.size()) {
      const int32_t slot0 = scratch.n_tokens();
      batch.clear();
      pieces.clear();
      while (qi < queue.size() && int(batch.size()) < max_batch_tokens) {
        const Segment& sg = queue[qi];
        const int32_t m = std::min<int32_t>(sg.e - at, max_batch_tokens - int32_t(batch.size()));
        pieces.push_back(Segment{at, at + m, sg.cand});
        for (int32_t t = at; t < at + m; ++t)
          batch.push_back(BatchEntry{s.tokens[t], s.positions[t], 0, slot0 + int32_t(batch.size()), false});
        at += m;
        if (at == sg.e && ++qi < queue.size()) at = queue[qi].b;
      }
      const int32_t m = int32_t(batch.size());
      if (!scratch.prepare_append(m)) return false;
      const SeqKv sk = seq_kv(scratch, pg, fills);
      const bool last = weighted && pieces.back().e == n;
      {
        ScopedMs timer(timings.check_forward_ms);
        fwd.run_to_layer(batch, std::span<const SeqKv>(&sk, 1), kCheckLayer, fresh_k, fresh_v, last ? &q : nullptr);
      }
      *n_checked += m;
      if (last) q_last.assign(q.end() - int64_t(n_head) * hd, q.end());
      int32_t j0 = 0;
      for (const Segment& p : pieces) {
        if (p.cand >= 0) score(p.cand, p.b, p.e - p.b, j0, slot0);
        j0 += p.e - p.b;
      }
    }
    queue.clear();
    return true;
  };
  auto check = [&](int32_t b, int32_t e, int cand) {
    if (b < e) queue.push_back(Segment{b, e, cand});
  };

  size_t ci = 0;
  for (const Run& r : s.runs) {
    for (; ci < cands.size() && cands[ci].begin < r.begin; ++ci) check(cands[ci].begin, cands[ci].end, int(ci));
    if (r.begin >= to) break;
    if (!r.cached) {
      check(r.begin, std::min(r.end, to), -1);  // context for the candidates' layer 0
      continue;
    }
    if (!run_queue()) return false;  // the table's tokens in order: the queue before the run
    if (r.attached) {
      scratch = s.table.share();  // the prefix hit: the table holds it already
    } else if (!r.copied.empty()) {
      if (!relocated_copy(pages, fwd.model(), r.copied, r.shift, scratch)) return false;
    } else {
      scratch.attach(r.pages);
    }
  }
  for (; ci < cands.size(); ++ci) check(cands[ci].begin, cands[ci].end, int(ci));
  if (!run_queue()) return false;
  if (!weighted || q_last.empty()) return true;

  // The last token's layer-1 attention over every slot of the scratch table (run_to_layer
  // wrote the fresh layer-1 keys there), per query head.
  ScopedMs timer(timings.check_score_ms);
  std::vector<double> a;
  const SeqKv sk = seq_kv(scratch, pg, fills);
  const int64_t n_keys = scratch.n_tokens();
  fwd.attention_weights(kCheckLayer, q_last.data(), sk, int32_t(n_keys), a);
  const int group = n_head / n_kv;
  size_t x = 0;
  for (size_t i = 0; i < cands.size(); ++i)
    for (int32_t j = 0; j < cands[i].size(); ++j, ++x) {
      double w = 0;
      for (int h = 0; h < n_head; ++h) w += a[size_t(h) * n_keys + slot_of[x]] * dev[x * n_kv + size_t(h / group)];
      scores[i][size_t(j)] = float(w);
    }
  return true;
}

}  // namespace pc
