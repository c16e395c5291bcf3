// KV admission through the server: with a KV memory that holds about two requests,
// four concurrent requests that each fit alone all succeed (none fails for lack of
// KV pages) with the text each gets alone; one that cannot fit is a 400 naming
// context_length_exceeded; /v1/models states the limit.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "server_fixture.h"

namespace pc::test {
namespace {

TEST(ServerAdmission, ConcurrentRequestsInSmallKvMemoryAllSucceed) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--parallel", "4", "--kv-memory", "640KiB",
                    "--threads", "1"});
  httplib::Client c = srv.client();
  const Reply models = get(c, "/v1/models");
  ASSERT_EQ(models.status, 200);
  const int64_t limit = models.body["data"][0]["context_length"];
  ASSERT_GT(limit, 400);
  const std::vector<std::string> prompts = {"Once upon a time", "Lily wanted to play", "The sun was hot",
                                            "Tom and Sue found a box"};
  auto body = [&](const std::string& p) {
    return json{{"prompt", p}, {"max_tokens", 380}, {"temperature", 0}, {"ignore_eos", true}};
  };
  std::vector<Reply> together(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      httplib::Client ci = srv.client();
      ci.set_read_timeout(120);
      together[i] = post(ci, "/v1/completions", body(prompts[i]));
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(together[i].status, 200) << together[i].raw;
    EXPECT_EQ(together[i].body["usage"]["completion_tokens"], 380);
    const Reply alone = post(c, "/v1/completions", body(prompts[i]));
    ASSERT_EQ(alone.status, 200) << alone.raw;
    EXPECT_EQ(alone.body["choices"][0]["text"], together[i].body["choices"][0]["text"]) << prompts[i];
  }
  const Reply stats = get(c, "/v1/cache/stats");
  EXPECT_GT(stats.body["engine"]["preemptions"].get<int64_t>(), 0) << stats.raw;
  // max_tokens past the limit: capped at it (the reply stops at the context's end).
  const Reply big = post(c, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", limit + 10}});
  ASSERT_EQ(big.status, 200) << big.raw;
  EXPECT_EQ(big.body["promptcache"]["max_tokens_capped"], limit - big.body["usage"]["prompt_tokens"].get<int64_t>())
      << big.raw;
  std::string huge;
  for (int64_t i = 0; i < limit; ++i) huge += "Lily and Tom ";
  const Reply too_long = post(c, "/v1/completions", json{{"prompt", huge}, {"max_tokens", 1}});
  EXPECT_EQ(too_long.status, 400) << too_long.raw;
  EXPECT_EQ(too_long.body["error"]["code"], "context_length_exceeded");
}

}  // namespace
}  // namespace pc::test
