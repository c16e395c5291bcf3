#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "common/error.h"

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

namespace {

// Higher logit first, lower id on ties: a total order, so every selection below picks
// the same tokens whatever order they arrive in.
struct ByLogit {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  }
};

}  // namespace

// Truncation selects only what it needs, never sorting the whole vocabulary:
//
//   top-k   nth_element: the k best, unordered (O(V))
//   weights w = exp((logit - max) / T) over what is left; Z = their sum
//   top-p   the best tokens in rounds of growing size (nth_element on the rest, then
//           a sort of the round) until their weight reaches top_p * Z — the smallest
//           prefix of the descending order that does, as a full sort would give
//   min-p   w >= min_p (p >= min_p * p_max, whatever the normalization): a filter
//
// cands_ ends holding the kept tokens with p = w (unnormalized), in a deterministic
// order: descending when top-p ran, else the order selection left.
void Sampler::truncate() {
  if (p_.top_k > 0 && size_t(p_.top_k) < cands_.size()) {
    std::nth_element(cands_.begin(), cands_.begin() + (p_.top_k - 1), cands_.end(), ByLogit{});
    cands_.resize(p_.top_k);
  }
  float mx = cands_[0].logit;
  for (const Cand& c : cands_) mx = std::max(mx, c.logit);
  // Divided, not multiplied by 1/T: a denormal temperature would make that infinite and
  // the best token's 0 * inf a NaN.
  double z = 0;
  for (Cand& c : cands_) {
    c.p = std::exp((c.logit - mx) / p_.temperature);
    z += c.p;
  }
  if (p_.top_p < 1.f) {
    const double need = double(p_.top_p) * z;
    double cum = 0;
    size_t done = 0, keep = cands_.size();
    for (size_t round = 64; done < cands_.size(); round *= 2) {
      const size_t end = std::min(cands_.size(), done + round);
      if (end < cands_.size()) std::nth_element(cands_.begin() + done, cands_.begin() + end, cands_.end(), ByLogit{});
      std::sort(cands_.begin() + done, cands_.begin() + end, ByLogit{});
      for (; done < end; ++done) {
        cum += cands_[done].p;
        if (cum >= need) break;
      }
      if (done < end) {
        keep = done + 1;
        break;
      }
    }
    cands_.resize(keep);
  }
  if (p_.min_p > 0.f) {
    // The best token has w = 1 and always stays.
    size_t w = 0;
    for (size_t r = 0; r < cands_.size(); ++r)
      if (cands_[r].p >= p_.min_p) cands_[w++] = cands_[r];
    cands_.resize(w);
  }
}

void Sampler::fill(std::span<const float> logits, std::span<const int32_t> recent,
                   const std::vector<uint64_t>* allowed) {
  if (!allowed) {
    cands_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) cands_[i] = {int32_t(i), logits[i], 0.f};
  } else {
    // Word by word, skipping empty words: a narrow mask costs little more than its
    // words, a wide one one pass over the vocabulary.
    cands_.clear();
    const std::vector<uint64_t>& m = *allowed;
    for (size_t w = 0; w < m.size(); ++w) {
      for (uint64_t bits = m[w]; bits; bits &= bits - 1) {
        const size_t i = w * 64 + size_t(__builtin_ctzll(bits));
        if (i < logits.size()) cands_.push_back({int32_t(i), logits[i], 0.f});
      }
    }
    if (cands_.empty()) throw Error("the grammar allows no token here");
  }
  apply_penalty(recent);
}

int32_t Sampler::greedy() const {
  size_t best = 0;
  for (size_t i = 1; i < cands_.size(); ++i)
    if (cands_[i].logit > cands_[best].logit) best = i;
  return cands_[best].id;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent,
                        const std::vector<uint64_t>* allowed) {
  fill(logits, recent, allowed);
  if (p_.temperature <= 0.f) return greedy();
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

std::vector<std::pair<int32_t, float>> Sampler::distribution(std::span<const float> logits,
                                                             std::span<const int32_t> recent,
                                                             const std::vector<uint64_t>* allowed) {
  fill(logits, recent, allowed);
  std::vector<std::pair<int32_t, float>> out;
  if (p_.temperature <= 0.f) {
    out.emplace_back(greedy(), 1.f);
    return out;
  }
  truncate();
  double sum = 0;
  for (const Cand& c : cands_) sum += c.p;
  for (const Cand& c : cands_) out.emplace_back(c.id, float(c.p / sum));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pc
