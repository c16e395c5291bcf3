#include "kv/kv_plan.h"

namespace pc {

KvPlan KvPlan::prompt(const std::vector<int32_t>& tokens) {
  KvPlan p;
  KvSpan s;
  s.kind = KvSpan::Kind::kPrefix;
  s.tokens = tokens;
  s.positions.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) s.positions[i] = int32_t(i);
  p.spans.push_back(std::move(s));
  return p;
}

int64_t KvPlan::n_tokens() const {
  int64_t n = 0;
  for (const KvSpan& s : spans) n += s.n_tokens();
  return n;
}

bool KvPlan::is_prefix() const {
  int32_t next = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const KvSpan& s = spans[i];
    if (s.kind == KvSpan::Kind::kModule) return false;
    if (s.kind == KvSpan::Kind::kPrefix && i != 0) return false;
    for (int32_t p : s.positions)
      if (p != next++) return false;
  }
  return true;
}

}  // namespace pc
