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

}  // namespace pc
