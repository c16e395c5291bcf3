// llama-server's flags on `promptcache serve`: -c/--ctx-size caps what one request may
// use, --api-key (repeatable) authenticates, -np sets --parallel.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

TEST(LlamaFlags, CtxSizeApiKeyAndParallel) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--kv-memory", "64MiB", "-c",
                    "64", "--api-key", "first", "--api-key", "second", "-np", "2"});
  auto anon = srv.client();
  EXPECT_EQ(get(anon, "/v1/models").status, 401);
  auto wrong = srv.client("third");
  EXPECT_EQ(get(wrong, "/v1/models").status, 401);
  auto first = srv.client("first"), second = srv.client("second");
  const Reply models = get(first, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.raw;
  EXPECT_EQ(models.body["data"][0]["context_length"], 64);
  EXPECT_GT(models.body["data"][0]["n_ctx_train"].get<int64_t>(), 64);  // the model's own
  const Reply props = get(second, "/props");
  ASSERT_EQ(props.status, 200) << props.raw;
  EXPECT_EQ(props.body["total_slots"], 2);
  EXPECT_EQ(props.body["n_ctx"], 64);
  // A request that fits the cap runs; one whose max_tokens goes past it stops at it.
  const Reply ok = post(first, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
  const Reply over = post(first, "/v1/completions",
                          {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"ignore_eos", true}});
  ASSERT_EQ(over.status, 200) << over.raw;
  EXPECT_EQ(over.body["usage"]["total_tokens"], 64) << over.raw;
  EXPECT_EQ(over.body["choices"][0]["finish_reason"], "length") << over.raw;
}

}  // namespace
}  // namespace pc::test
