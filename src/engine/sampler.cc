#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "gguf/error.h"

namespace pc {

int32_t argmax(std::span<const float> v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = int32_t(i);
  return best;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n) {
  const int32_t V = int32_t(logits.size());
  float mx = logits[0];
  for (float l : logits) mx = std::max(mx, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const double lse = mx + std::log(sum);
  TokenLogprobs out;
  out.logprob = float(logits[token] - lse);
  const int32_t n = std::clamp(top_n, 0, V);
  if (n == 0) return out;
  // The n best seen so far, as a heap ordered by `better`: its top is the worst
  // kept, the one a better token replaces.
  auto better = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::vector<int32_t> best;
  best.reserve(size_t(n) + 1);
  for (int32_t i = 0; i < V; ++i) {
    if (int32_t(best.size()) == n && !better(i, best.front())) continue;
    best.push_back(i);
    std::push_heap(best.begin(), best.end(), better);
    if (int32_t(best.size()) > n) {
      std::pop_heap(best.begin(), best.end(), better);
      best.pop_back();
    }
  }
  std::sort_heap(best.begin(), best.end(), better);
  for (int32_t id : best) out.top.emplace_back(id, float(logits[id] - lse));
  return out;
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {
  if (p.top_p <= 0.f || p.top_p > 1.f) throw Error("top_p must be in (0, 1]");
  if (p.min_p < 0.f || p.min_p > 1.f) throw Error("min_p must be in [0, 1]");
  if (p.top_k < 0) throw Error("top_k must be >= 0");
  if (p.repeat_penalty <= 0.f) throw Error("repeat_penalty must be > 0");
}

void Sampler::apply_penalty(std::span<const int32_t> recent) {
  if (p_.repeat_penalty == 1.f || p_.repeat_last_n == 0) return;
  const size_t n = p_.repeat_last_n < 0 ? recent.size()
                                         : std::min<size_t>(recent.size(), p_.repeat_last_n);
  std::unordered_set<int32_t> seen(recent.end() - n, recent.end());
  for (Cand& c : cands_) {
    if (!seen.count(c.id)) continue;
    c.logit = c.logit > 0 ? c.logit / p_.repeat_penalty : c.logit * p_.repeat_penalty;
  }
}

void Sampler::truncate() {
  auto by_logit = [](const Cand& a, const Cand& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  if (p_.top_k > 0 && size_t(p_.top_k) < cands_.size()) {
    std::partial_sort(cands_.begin(), cands_.begin() + p_.top_k, cands_.end(), by_logit);
    cands_.resize(p_.top_k);
  } else {
    std::sort(cands_.begin(), cands_.end(), by_logit);
  }
  // Softmax with temperature, in sorted order (fixed summation order).
  const float mx = cands_[0].logit;
  double sum = 0;
  for (Cand& c : cands_) {
    c.p = std::exp((c.logit - mx) / p_.temperature);
    sum += c.p;
  }
  for (Cand& c : cands_) c.p = float(c.p / sum);
  if (p_.top_p < 1.f) {
    double cum = 0;
    size_t keep = cands_.size();
    for (size_t i = 0; i < cands_.size(); ++i) {
      cum += cands_[i].p;
      if (cum >= p_.top_p) { keep = i + 1; break; }
    }
    cands_.resize(keep);
  }
  if (p_.min_p > 0.f) {
    const float thr = p_.min_p * cands_[0].p;
    size_t keep = 1;
    while (keep < cands_.size() && cands_[keep].p >= thr) ++keep;
    cands_.resize(keep);
  }
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  cands_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands_[i] = {int32_t(i), logits[i], 0.f};
  apply_penalty(recent);
  if (p_.temperature <= 0.f) {
    size_t best = 0;
    for (size_t i = 1; i < cands_.size(); ++i)
      if (cands_[i].logit > cands_[best].logit) best = i;
    return cands_[best].id;
  }
  truncate();
  double sum = 0;
  for (const Cand& c : cands_) sum += c.p;
  const double r = std::uniform_real_distribution<double>(0.0, sum)(rng_);
  double cum = 0;
  for (const Cand& c : cands_) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return cands_.back().id;
}

}  // namespace pc
