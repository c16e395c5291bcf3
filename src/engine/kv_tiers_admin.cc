// KvTiers' admin face: what the cache API and /metrics may know of the tiers, as plain
// data (engine/cache_report.h).
#include <ctime>

#include "engine/kv_tiers.h"
#include "tier/entry_key.h"

namespace pc {

namespace {

// TierEntryView::kind of an entry's namespace.
const char* tier_entry_kind(KvKind kind) {
  switch (kind) {
    case KvKind::kExact: return "prefix";
    case KvKind::kModule: return "module_segment";
    case KvKind::kBlock: return "block";
    case KvKind::kApproximate: return "approximate";
  }
  return "prefix";
}

}  // namespace

TierReport KvTiers::report() const {
  return TierReport{stats(), tier_stats(), int64_t(in_flight())};
}

std::vector<TierEntryView> KvTiers::entries(const std::string& model, const CacheScope& scope) const {
  std::vector<TierEntryView> out;
  for (const KvTier* tier : tiers()) {
    if (!tier->listable()) continue;
    for (const TierItem& it : tier->list()) {
      if (it.ns.model != model || it.ns.scope != scope) continue;
      TierEntryView v;
      v.id = key_hex(it.key);
      v.tier = tier->name();
      v.kind = it.state ? "state" : tier_entry_kind(it.ns.kind);
      v.tokens = int64_t(it.n_tokens);
      v.bytes = int64_t(it.bytes);
      if (it.keep_until > 0 && it.keep_until > int64_t(std::time(nullptr))) v.expires_at = double(it.keep_until);
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::map<std::string, std::map<CacheScope, NamespaceBytes>> KvTiers::usage() const {
  std::map<std::string, std::map<CacheScope, NamespaceBytes>> out;
  for (const KvTier* tier : tiers()) {
    if (!tier->listable()) continue;
    std::map<CacheScope, NamespaceBytes>& usage = out[tier->name()];
    for (const TierItem& it : tier->list()) {
      NamespaceBytes& u = usage[it.ns.scope];
      ++u.entries;
      u.bytes += int64_t(it.bytes);
    }
  }
  return out;
}

}  // namespace pc
