// The tier benchmark (disabled: run with --gtest_also_run_disabled_tests
// --gtest_filter='*TierBench*'). A quick small-shape run checks that it works.
#include "tier/tier_bench.h"

#include <gtest/gtest.h>

#include <cstdio>

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

TEST(TierBench, DISABLED_TinyLlama4096) {
  test::RedisServer server;
  TierBenchOptions o = bench_options(server);
  const auto rows = run_tier_bench(o);
  std::printf("%s", format_tier_bench(o, rows).c_str());
}

}  // namespace
}  // namespace pc
