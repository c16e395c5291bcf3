#include "engine/state_snapshots.h"

#include <algorithm>

namespace pc {

void SequenceSnapshots::plan(const KvPlan& plan, int32_t n_prompt, int32_t max_kept) {
  max_kept_ = std::max(1, max_kept);
  at_.clear();
  captured_.clear();
  for (const KvBlock& b : plan.blocks)
    for (int32_t p : {b.begin, b.end})
      if (p > 0 && p <= n_prompt) at_.push_back(p);
  // The end of the prompt, and the token before it: a repeat of the prompt computes
  // its last token for logits, so it resumes one token earlier.
  if (n_prompt > 0) at_.push_back(n_prompt);
  if (n_prompt > 1) at_.push_back(n_prompt - 1);
  std::sort(at_.begin(), at_.end());
  at_.erase(std::unique(at_.begin(), at_.end()), at_.end());
}

void SequenceSnapshots::captures(const ModelConfig& c, int32_t first, int32_t count, std::vector<StateCapture>& out) {
  auto it = std::upper_bound(at_.begin(), at_.end(), first);
  for (; it != at_.end() && *it <= first + count; ++it) {
    // A position captured before (a sequence recomputing after preemption) is taken again.
    while (!captured_.empty() && captured_.back().at >= *it) captured_.pop_back();
    captured_.push_back(Captured{*it, RecurrentState(c)});
    out.push_back(StateCapture{*it, &captured_.back().state});
  }
}

void SequenceSnapshots::trim() {
  while (int32_t(captured_.size()) > max_kept_) captured_.pop_front();
}

std::vector<PrefixState> SequenceSnapshots::to_publish(const RecurrentState& current, int32_t n_kv) const {
  std::vector<PrefixState> out;
  for (const Captured& c : captured_)
    if (c.at < n_kv && c.state.n_tokens() == c.at) out.push_back(PrefixState{c.at, &c.state});
  if (current.n_tokens() == n_kv && n_kv > 0) out.push_back(PrefixState{n_kv, &current});
  if (int32_t(out.size()) > max_kept_) out.erase(out.begin(), out.end() - max_kept_);
  return out;
}

}  // namespace pc
