#include "engine/recompute.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/sequence.h"
#include "gguf/quants.h"
#include "kernels/k_layout.h"
#include "kv/kv_page_store.h"
#include "model/forward.h"
#include "model/model.h"

namespace pc {

std::optional<RecomputePolicy> parse_recompute_policy(const std::string& name) {
  if (name == "prefix") return RecomputePolicy::kPrefix;
  if (name == "deviation") return RecomputePolicy::kDeviation;
  if (name == "impact") return RecomputePolicy::kImpact;
  return std::nullopt;
}

const char* recompute_policy_name(RecomputePolicy p) {
  switch (p) {
    case RecomputePolicy::kPrefix: return "prefix";
    case RecomputePolicy::kDeviation: return "deviation";
    case RecomputePolicy::kImpact: return "impact";
  }
  return "?";
}

namespace {

// ceil(x) that does not round 0.15 × 20 = 3.0000000000000004 up to 4.
int64_t ceil_share(double budget, int64_t n) { return std::min<int64_t>(n, int64_t(std::ceil(budget * double(n) - 1e-9))); }

}  // namespace

RecomputeMasks select_prefix(std::span<const ReuseCandidate> cands, double budget) {
  RecomputeMasks masks;
  for (const ReuseCandidate& c : cands) {
    std::vector<uint8_t> m(size_t(c.size()), 0);
    std::fill_n(m.begin(), ceil_share(budget, c.size()), uint8_t(1));
    masks.push_back(std::move(m));
  }
  return masks;
}

int64_t budget_tokens(std::span<const ReuseCandidate> cands, double budget) {
  int64_t total = 0;
  for (const ReuseCandidate& c : cands) total += c.size();
  return ceil_share(budget, total);
}

RecomputeMasks select_by_score(std::span<const ReuseCandidate> cands, const std::vector<std::vector<float>>& scores,
                               double budget, int32_t run) {
  run = std::max(run, 1);
  struct Window {
    double score;
    int32_t cand, begin, end;  // tokens [begin, end) of candidate `cand`
  };
  std::vector<Window> windows;
  RecomputeMasks masks;
  for (size_t i = 0; i < cands.size(); ++i) {
    masks.emplace_back(size_t(cands[i].size()), 0);
    for (int32_t b = 0; b < cands[i].size(); b += run) {
      const int32_t e = std::min(b + run, cands[i].size());
      double sum = 0;
      for (int32_t j = b; j < e; ++j) sum += scores[i][size_t(j)];
      windows.push_back({sum / double(e - b), int32_t(i), b, e});
    }
  }
  // Highest mean first; equal scores keep prompt order (stable sort over prompt order).
  std::stable_sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.score > b.score; });
  int64_t left = budget_tokens(cands, budget);
  for (const Window& w : windows) {
    if (left <= 0) break;
    const int32_t n = int32_t(std::min<int64_t>(left, w.end - w.begin));
    std::fill_n(masks[size_t(w.cand)].begin() + w.begin, n, uint8_t(1));
    left -= n;
  }
  return masks;
}

std::vector<PageSlice> sub_slices(std::span<const PageSlice> src, int32_t skip, int32_t take) {
  std::vector<PageSlice> out;
  for (const PageSlice& sl : src) {
    if (take <= 0) break;
    if (skip >= sl.size()) {
      skip -= sl.size();
      continue;
    }
    const int32_t n = std::min(sl.size() - skip, take);
    out.push_back({sl.page, sl.begin + skip, sl.begin + skip + n});
    take -= n;
    skip = 0;
  }
  return out;
}

// The check pass. Every token up to the end of the last candidate (kImpact: up to the
// prompt's end) that has no exact KV yet — the candidates and the runs to compute — is
// run through layer 0 in a scratch table laid out as the sequence will be, the prefix
// and exact module KV attached where the sequence has them, so each token's layer 0
// attends to exactly the context it will have. The scratch pages hold only layer-0 KV
// and are released at the end. The candidates' KV in `src` must sit at its new
// positions (shift 0).
//
// Scores, per candidate token and KV head g: dev[g] = |K1 - K1'|² + |V1 - V1'|² (fresh vs
// reused layer-1 K/V, F16 as stored). kDeviation sums dev over the KV heads; kImpact
// weights each query head's dev by the softmax attention a[h] of the prompt's last token
// at layer 1 (its fresh query over every token's fresh or exact layer-1 key), summed over
// query heads: a token matters as much as the next-token prediction looks at it.
bool Engine::deviation_scores(Seq& s, const std::vector<ReuseCandidate>& cands,
                              std::vector<std::vector<float>>& scores, int64_t* n_checked) {
  scores.assign(cands.size(), {});
  for (size_t i = 0; i < cands.size(); ++i) scores[i].assign(size_t(cands[i].size()), 0.f);
  const ModelConfig& c = model_.config();
  if (cands.empty() || c.n_layer < 2) return true;  // one layer: rotated KV is exact
  constexpr int kCheckLayer = 1;
  const bool weighted = s.req.reuse.policy == RecomputePolicy::kImpact;
  const int hd = int(c.head_dim), n_kv = int(c.n_kv_head), n_head = int(c.n_head);
  const int64_t kvd = int64_t(n_kv) * hd;
  const int P = pages_->page_size();
  KvPageStore& kv = *pages_->store();
  const int32_t n = int32_t(s.tokens.size());
  const int32_t to = weighted ? n : cands.back().end;

  // kImpact: every token's layer-1 key in attention order [tokens][kvd], and where each
  // candidate token's KV-head deviations start in it.
  std::vector<float> keys;
  std::vector<float> dev;               // [candidate tokens in order][n_kv]
  std::vector<int64_t> key_of;          // [candidate tokens in order]: row in keys
  std::vector<float> q_last;            // [n_head * hd]
  auto keys_of_pages = [&](std::span<const PageEntry> pages) {
    for (const PageEntry& e : pages) {
      const uint16_t *kb = nullptr, *vb = nullptr;
      kv.layer_blocks(kCheckLayer, std::span<const int32_t>(&e.page, 1), &kb, &vb);
      for (int slot = 0; slot < e.filled; ++slot)
        for (int g = 0; g < n_kv; ++g)
          for (int d = 0; d < hd; ++d) keys.push_back(fp16_to_fp32(kb[size_t(g) * P * hd + k_index(P, hd, slot, d)]));
    }
  };

  PageTable scratch(*pages_);
  std::vector<int32_t> pg, fills;
  std::vector<uint16_t> k16, v16;
  std::vector<float> q;
  std::vector<BatchEntry> batch;
  // Layer 0 over tokens [b, e) appended to the scratch table, then the deviations of
  // the candidate tokens among them.
  auto check = [&](int32_t b, int32_t e, int cand) -> bool {
    for (int32_t at = b; at < e;) {
      const int32_t m = std::min<int32_t>(e - at, opt_.max_batch_tokens);
      const int32_t slot0 = scratch.n_tokens();
      if (!scratch.prepare_append(m)) return false;
      batch.clear();
      for (int32_t j = 0; j < m; ++j) batch.push_back(BatchEntry{s.tokens[at + j], s.positions[at + j], 0, slot0 + j, false});
      const SeqKv sk = seq_kv(scratch, pg, fills);
      const bool last = weighted && at + m == n;
      fwd_->run_to_layer(batch, std::span<const SeqKv>(&sk, 1), kCheckLayer, k16, v16, last ? &q : nullptr);
      *n_checked += m;
      if (last) q_last.assign(q.end() - int64_t(n_head) * hd, q.end());
      const int64_t key0 = int64_t(keys.size()) / kvd;
      if (weighted)
        for (int64_t x = 0; x < int64_t(m) * kvd; ++x) keys.push_back(fp16_to_fp32(k16[size_t(x)]));
      if (cand >= 0) {
        const ReuseCandidate& rc = cands[size_t(cand)];
        // The reused layer-1 KV of these tokens: slices of rc.src in token order.
        const std::vector<PageSlice> mine = sub_slices(rc.src, at - rc.begin, m);
        int32_t j = 0;
        for (const PageSlice& sl : mine) {
          const uint16_t *kb = nullptr, *vb = nullptr;
          kv.layer_blocks(kCheckLayer, std::span<const int32_t>(&sl.page, 1), &kb, &vb);
          for (int32_t slot = sl.begin; slot < sl.end; ++slot, ++j) {
            double total = 0;
            for (int g = 0; g < n_kv; ++g) {
              const uint16_t* kh = kb + size_t(g) * P * hd;
              const uint16_t* vh = vb + (size_t(g) * P + slot) * hd;
              const uint16_t* kf = k16.data() + j * kvd + g * hd;
              const uint16_t* vf = v16.data() + j * kvd + g * hd;
              double d2 = 0;
              for (int d = 0; d < hd; ++d) {
                const double dk = double(fp16_to_fp32(kf[d])) - fp16_to_fp32(kh[k_index(P, hd, slot, d)]);
                const double dv = double(fp16_to_fp32(vf[d])) - fp16_to_fp32(vh[d]);
                d2 += dk * dk + dv * dv;
              }
              total += d2;
              if (weighted) dev.push_back(float(d2));
            }
            scores[size_t(cand)][size_t(at - rc.begin + j)] = float(total);
            if (weighted) key_of.push_back(key0 + j);
          }
        }
      }
      at += m;
    }
    return true;
  };

  size_t ci = 0;
  for (const Run& r : s.runs) {
    for (; ci < cands.size() && cands[ci].begin < r.begin; ++ci)
      if (!check(cands[ci].begin, cands[ci].end, int(ci))) return false;
    if (r.begin >= to) break;
    if (r.attached) {
      scratch = s.table.share();  // the prefix hit: the table holds it already
      if (weighted) keys_of_pages(s.table.entries());
    } else if (r.cached) {
      scratch.attach(r.pages);
      if (weighted) keys_of_pages(r.pages);
    } else if (!check(r.begin, std::min(r.end, to), -1)) {  // context for the candidates' layer 0
      return false;
    }
  }
  for (; ci < cands.size(); ++ci)
    if (!check(cands[ci].begin, cands[ci].end, int(ci))) return false;
  if (!weighted || q_last.empty()) return true;

  // The last token's layer-1 attention over every key, per query head.
  const int64_t n_keys = int64_t(keys.size()) / kvd;
  const int group = n_head / n_kv;
  const double scale = 1.0 / std::sqrt(double(hd));
  std::vector<double> a(size_t(n_head) * n_keys);
  for (int h = 0; h < n_head; ++h) {
    const int g = h / group;
    double mx = -1e300;
    double* ah = a.data() + size_t(h) * n_keys;
    for (int64_t t = 0; t < n_keys; ++t) {
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += double(q_last[size_t(h) * hd + d]) * keys[size_t(t * kvd + g * hd + d)];
      ah[t] = dot * scale;
      mx = std::max(mx, ah[t]);
    }
    double sum = 0;
    for (int64_t t = 0; t < n_keys; ++t) sum += ah[t] = std::exp(ah[t] - mx);
    for (int64_t t = 0; t < n_keys; ++t) ah[t] /= sum;
  }
  size_t x = 0;
  for (size_t i = 0; i < cands.size(); ++i)
    for (int32_t j = 0; j < cands[i].size(); ++j, ++x) {
      double w = 0;
      for (int h = 0; h < n_head; ++h) w += a[size_t(h) * n_keys + key_of[x]] * dev[x * n_kv + size_t(h / group)];
      scores[i][size_t(j)] = float(w);
    }
  return true;
}

}  // namespace pc
