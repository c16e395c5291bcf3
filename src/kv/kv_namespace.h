// The namespace of cached KV: KV is reusable only for the same model, KV type, cache
// scope and kind. Every cache (prefix index, module store, block index, tier entries)
// keys by it, as a typed value: no part of it is ever recovered by parsing a string.
//
//   field          what it separates
//   model          fingerprint of the weights (model.h)
//   kv_type        how pages store K and V (kernels/kv_quant.h: "f16", "q8_0", "q4_0")
//   scope.tenant   the API tenant a key maps to ("" = the default tenant)
//   scope.salt     a request's cache_salt within its tenant ("" = none)
//   kind           exact prefixes, approximately built KV, blocks indexed by content,
//                  module segments (with their digest and segment number)
//
// Serializations, one function each: tier_scope_bytes() (the bytes tier keys hash and
// tier entries store, read back by read_tier_scope_bytes()), scope_key() (a scope's
// bytes, which the server's metric label hashes with a secret) and scope_name() (the
// name the cache API and dashboard show).
#pragma once
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace pc {

// Whose cached KV a request may reuse: one API tenant, and within it one cache_salt.
struct CacheScope {
  std::string tenant;
  std::string salt;
  CacheScope() = default;
  CacheScope(std::string tenant_, std::string salt_ = "") : tenant(std::move(tenant_)), salt(std::move(salt_)) {}
  CacheScope(const char* tenant_) : tenant(tenant_) {}
  auto operator<=>(const CacheScope&) const = default;
};

// The scope as bytes no other scope has (each field length-prefixed): for keys and
// hashes of things kept per scope (tier keys, reply memory, metric labels).
std::string scope_key(const CacheScope& scope);

// "TENANT", "TENANT/salt:SALT", "salt:SALT" (the default tenant with a salt) or "":
// shown to clients, never parsed (a name a client sends back is looked up among the
// scopes that exist).
std::string scope_name(const CacheScope& scope);

enum class KvKind : uint8_t {
  kExact = 0,        // prefixes whose KV is exactly what recomputation gives
  kApproximate = 1,  // KV an approximate request built (docs/api.md "Approximate reuse")
  kBlock = 2,        // a request part's KV at position 0, indexed by its tokens
  kModule = 3,       // one segment of a PML module (module_digest, segment)
};
const char* to_string(KvKind kind);

struct KvNamespace {
  std::string model;    // model fingerprint
  std::string kv_type;  // kv_type_name(): "f16", "q8_0", "q4_0"
  CacheScope scope;
  KvKind kind = KvKind::kExact;
  uint64_t module_digest = 0;  // kModule: the module's content digest
  int32_t segment = 0;         // kModule: which of its segments
  auto operator<=>(const KvNamespace&) const = default;

  // The same model, KV type and scope, in another kind (module fields cleared).
  KvNamespace as(KvKind k) const;
  // A module segment's namespace within this one's scope.
  KvNamespace module_segment(uint64_t digest, int32_t seg) const;
};

// The scope and kind as bytes: a version byte, the kind, the module fields, then the
// tenant and salt, each length-prefixed. Tier keys hash it; tier entries store it.
std::string tier_scope_bytes(const KvNamespace& ns);
// Reads tier_scope_bytes() output into ns's scope and kind fields; false when the
// bytes are not such output (a corrupt or foreign entry).
bool read_tier_scope_bytes(std::string_view bytes, KvNamespace* ns);

}  // namespace pc
