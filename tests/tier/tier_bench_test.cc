// The tier benchmark (`promptcache bench tiers` runs it at real shapes): a quick
// small-shape run checks that it works.
#include "tier/tier_bench.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

TierBenchOptions bench_options(test::RedisServer& server) {
  TierBenchOptions o;
  o.dir = test::temp_dir();
  if (server.running()) o.redis_url = server.url();
  return o;
}

TEST(TierBench, SmallShapeRuns) {
  test::RedisServer server;
  TierBenchOptions o = bench_options(server);
  o.shape = KvShape{2, 2, 8, 16};
  o.n_tokens = 100;
  o.repeats = 1;
  const auto rows = run_tier_bench(o);
  EXPECT_GE(rows.size(), server.running() ? 13u : 10u);
  for (const auto& r : rows) EXPECT_GT(r.seconds, 0) << r.name;
}

}  // namespace
}  // namespace pc
