// A reply capped at the context's end: when the prompt fits but prompt + max_tokens
// does not, the reply runs to the context's end and stops with finish_reason "length"
// (Anthropic stop_reason "max_tokens"), reporting promptcache.max_tokens_capped; a
// prompt that does not fit alone is still a 400 context_length_exceeded.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

constexpr int kCtx = 160;

class ContextCap : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "-c",
                            std::to_string(kCtx), "--chat-template-file",
                            shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")});
  }
  static void TearDownTestSuite() {
    delete srv;
    srv = nullptr;
  }
  static ServeProcess* srv;
};
ServeProcess* ContextCap::srv = nullptr;

TEST_F(ContextCap, CompletionStopsAtTheContextEnd) {
  auto c = srv->client();
  const Reply r = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 32000},
                                              {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const int64_t prompt = r.body["usage"]["prompt_tokens"];
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length") << r.raw;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], kCtx - prompt) << r.raw;
  EXPECT_EQ(r.body["promptcache"]["max_tokens_capped"], kCtx - prompt) << r.raw;
  // max_tokens that fits is not capped, and says nothing about it.
  const Reply fits = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_EQ(fits.status, 200) << fits.raw;
  EXPECT_FALSE(fits.body["promptcache"].contains("max_tokens_capped")) << fits.raw;
  // A prompt that does not fit alone stays a 400.
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "Lily and Tom ";
  const Reply over = post(c, "/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 1}});
  EXPECT_EQ(over.status, 400) << over.raw;
  EXPECT_EQ(over.body["error"]["code"], "context_length_exceeded") << over.raw;
  EXPECT_EQ(over.body["error"]["param"], "prompt") << over.raw;
}

TEST_F(ContextCap, ChatWholeAndStreamed) {
  auto c = srv->client();
  json body = {{"messages", {{{"role", "system"}, {"content", "Hi"}}, {{"role", "user"}, {"content", "Tell"}}}},
               {"max_tokens", 32000}, {"temperature", 0}, {"ignore_eos", true}};
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const int64_t prompt = r.body["usage"]["prompt_tokens"];
  ASSERT_LT(prompt, kCtx);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length") << r.raw;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], kCtx - prompt) << r.raw;
  EXPECT_EQ(r.body["promptcache"]["max_tokens_capped"], kCtx - prompt) << r.raw;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const Reply s = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  const std::vector<std::string> ev = sse_events(s.raw);
  ASSERT_GE(ev.size(), 3u);
  const json last_choice = json::parse(ev[ev.size() - 3]);
  EXPECT_EQ(last_choice["choices"][0]["finish_reason"], "length") << s.raw;
  const json usage = json::parse(ev[ev.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], kCtx - prompt) << s.raw;
}

TEST_F(ContextCap, AnthropicMaxTokens32000) {
  // Claude Code's request: max_tokens 32000 on every call.
  auto c = srv->client();
  const json body = {{"max_tokens", 32000}, {"temperature", 0}, {"system", "Hi"},
                     {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}};
  const Reply r = post(c, "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& u = r.body["usage"];
  const int64_t prompt = u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>() +
                         u["cache_creation_input_tokens"].get<int64_t>();
  EXPECT_EQ(r.body["promptcache"]["max_tokens_capped"], kCtx - prompt) << r.raw;
  // Stopped at the end of generation or at the context's end, never past it.
  const int64_t out = u["output_tokens"];
  EXPECT_LE(out, kCtx - prompt);
  EXPECT_EQ(r.body["stop_reason"], out == kCtx - prompt ? "max_tokens" : "end_turn") << r.raw;
  // A prompt that does not fit alone: 400 in Anthropic's shape.
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "Lily and Tom ";
  const Reply over = post(c, "/v1/messages", {{"max_tokens", 32000}, {"messages", {{{"role", "user"}, {"content", long_text}}}}});
  EXPECT_EQ(over.status, 400) << over.raw;
  EXPECT_EQ(over.body["type"], "error") << over.raw;
  EXPECT_EQ(over.body["error"]["type"], "invalid_request_error") << over.raw;
}

}  // namespace
}  // namespace pc::test
