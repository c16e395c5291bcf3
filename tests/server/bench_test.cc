// `promptcache bench serve` with tiny settings: it runs both configurations
// against an in-process server without errors, and the cache shows.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

TEST(BenchServe, TinyRunHasNoErrorsAndCacheHits) {
  const std::string out = temp_dir() + "/bench_serve.json";
  const std::string cmd = promptcache_path() + " bench serve -m " + shared_path("models/stories260K.gguf") +
                          " --chat-template-file " +
                          shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja") +
                          " --clients 2 --seconds 2 --system-words 60 --max-tokens 4 --parallel 2"
                          " --kv-memory 32MiB --json " + out + " > " + temp_dir() + "/bench.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  const json j = json::parse(in);
  ASSERT_EQ(j["runs"].size(), 2u) << j.dump(2);
  for (const json& r : j["runs"]) {
    EXPECT_EQ(r["errors"], 0) << r.dump();
    EXPECT_GT(r["requests"].get<int>(), 0) << r.dump();
    EXPECT_GT(r["generated_tokens_per_s"].get<double>(), 0) << r.dump();
    EXPECT_GT(r["ttft_p50_ms"].get<double>(), 0) << r.dump();
  }
  EXPECT_TRUE(j["runs"][0]["prefix_cache"].get<bool>());
  EXPECT_GT(j["runs"][0]["cached_tokens"].get<int>(), 0);
  EXPECT_FALSE(j["runs"][1]["prefix_cache"].get<bool>());
  EXPECT_EQ(j["runs"][1]["cached_tokens"], 0);
}

}  // namespace
}  // namespace pc::test
