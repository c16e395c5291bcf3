// The typed namespace: its serializations round-trip, and namespaces that differ in
// any field — kind and salt included — never share an entry.
#include "kv/kv_namespace.h"

#include <gtest/gtest.h>

#include <vector>

namespace pc {
namespace {

std::vector<KvNamespace> variety() {
  const KvNamespace base{"model-abc", "f16", CacheScope("alice", "s1")};
  return {base,
          base.as(KvKind::kApproximate),
          base.as(KvKind::kBlock),
          base.module_segment(0x0123456789abcdefULL, 0),
          base.module_segment(0x0123456789abcdefULL, 3),
          base.module_segment(0xfedcba9876543210ULL, 3),
          KvNamespace{"model-abc", "f16", CacheScope("alice")},
          KvNamespace{"model-abc", "f16", CacheScope("", "s1")},
          KvNamespace{"model-abc", "f16", CacheScope()},
          KvNamespace{"model-abc", "f16", CacheScope("alice/salt:s1")},
          KvNamespace{"model-abc", "f16", CacheScope(std::string("a\x1f" "b", 3), std::string("\0x", 2))}};
}

TEST(KvNamespace, TierScopeBytesRoundTrip) {
  for (const KvNamespace& ns : variety()) {
    KvNamespace back{ns.model, ns.kv_type, CacheScope()};
    ASSERT_TRUE(read_tier_scope_bytes(tier_scope_bytes(ns), &back)) << scope_name(ns.scope);
    EXPECT_EQ(back, ns);
  }
}

TEST(KvNamespace, DistinctNamespacesHaveDistinctTierBytesAndScopeKeys) {
  const std::vector<KvNamespace> all = variety();
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j) {
      EXPECT_NE(tier_scope_bytes(all[i]), tier_scope_bytes(all[j])) << i << " vs " << j;
      if (all[i].scope != all[j].scope) {
        EXPECT_NE(scope_key(all[i].scope), scope_key(all[j].scope)) << i << " " << j;
      }
    }
  // Names are for people: a tenant literally named "alice/salt:s1" shows like alice's
  // salted scope, but its key (what labels and reply memory hash) is another.
  EXPECT_EQ(scope_name(CacheScope("alice/salt:s1")), scope_name(CacheScope("alice", "s1")));
  EXPECT_NE(scope_key(CacheScope("alice/salt:s1")), scope_key(CacheScope("alice", "s1")));
}

TEST(KvNamespace, ScopeNames) {
  EXPECT_EQ(scope_name(CacheScope()), "");
  EXPECT_EQ(scope_name(CacheScope("bob")), "bob");
  EXPECT_EQ(scope_name(CacheScope("bob", "x")), "bob/salt:x");
  EXPECT_EQ(scope_name(CacheScope("", "x")), "salt:x");
}

TEST(KvNamespace, CorruptScopeBytesAreRejected) {
  const std::string good = tier_scope_bytes(KvNamespace{"m", "f16", CacheScope("t", "s")}.module_segment(7, 2));
  KvNamespace out{"m", "f16", CacheScope()};
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(read_tier_scope_bytes(good.substr(0, n), &out)) << n;
  EXPECT_FALSE(read_tier_scope_bytes(good + "x", &out));
  std::string bad_kind = good;
  bad_kind[1] = char(9);
  EXPECT_FALSE(read_tier_scope_bytes(bad_kind, &out));
  std::string bad_version = good;
  bad_version[0] = char(2);
  EXPECT_FALSE(read_tier_scope_bytes(bad_version, &out));
  // Module fields on a kind that has none.
  std::string stray = tier_scope_bytes(KvNamespace{"m", "f16", CacheScope("t")}.module_segment(7, 2));
  stray[1] = char(KvKind::kBlock);
  EXPECT_FALSE(read_tier_scope_bytes(stray, &out));
  EXPECT_EQ(out, (KvNamespace{"m", "f16", CacheScope()}));  // untouched by failures
}

}  // namespace
}  // namespace pc
