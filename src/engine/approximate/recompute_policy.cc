#include "engine/approximate/recompute_policy.h"

#include <algorithm>
#include <cmath>

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

}  // namespace pc
