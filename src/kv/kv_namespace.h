// The namespace of cached KV: KV is reusable only for the same model, KV type and
// tenant. Every cache (prefix index, module store, tier entries) keys by it.
#pragma once
#include <compare>
#include <string>

namespace pc {

struct KvNamespace {
  std::string model;    // model fingerprint
  std::string kv_type;  // "f16", "bf16", "q8_0"
  std::string tenant;   // tenant salt; "" = shared
  auto operator<=>(const KvNamespace&) const = default;
};

// The API tenant whose bounds a namespace's tenant counts against: without the
// server's cache_salt part ("TENANT/salt:SALT"; "salt:SALT" for the default tenant
// "") and without a derived kind ("<tenant>\x1f...": approximate, block, module).
inline std::string quota_owner(const std::string& ns_tenant) {
  const std::string own = ns_tenant.substr(0, ns_tenant.find('\x1f'));
  if (own.rfind("salt:", 0) == 0) return "";
  return own.substr(0, own.find("/salt:"));
}

}  // namespace pc
