// The chat templates of Gemma 2 and Phi-3.5 serving chat requests on models of
// their architecture (random-weight models from ../shared/models/arch, a real
// `promptcache serve` process): the template renders, the reply is generated,
// and the next turn of the conversation hits the cache — on Gemma 2 through the
// sliding-window layers, whose KV is kept whole.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

struct ArchChat {
  const char* model;
  const char* tmpl;
  const char* turn_start;  // what the rendered prompt of the first user turn contains
};

class ArchChatTest : public ::testing::TestWithParam<ArchChat> {};

TEST_P(ArchChatTest, ServesAConversation) {
  const ArchChat& p = GetParam();
  ServeProcess srv({"-m", shared_path(std::string("models/arch/") + p.model), "--chat-template-file",
                    shared_path(std::string("templates-2026/") + p.tmpl), "--kv-memory", "32MiB"});
  auto c = srv.client();
  json messages = json::array({{{"role", "user"}, {"content", "Tell me about the old lighthouse by the sea."}}});
  Reply t = post(c, "/apply-template", {{"messages", messages}});
  ASSERT_EQ(t.status, 200) << t.raw;
  EXPECT_NE(t.body["prompt"].get<std::string>().find(p.turn_start), std::string::npos) << t.body["prompt"];

  Reply r1 = post(c, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(r1.status, 200) << r1.raw;
  EXPECT_EQ(r1.body["choices"][0]["message"]["role"], "assistant");
  const std::string reply = r1.body["choices"][0]["message"]["content"].get<std::string>();
  const int64_t prompt1 = r1.body["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_GT(prompt1, 10);
  EXPECT_GT(r1.body["usage"]["completion_tokens"].get<int64_t>(), 0);

  // The next turn resends the history: at least the first turn's prompt hits
  // (less its last token, which the cache never covers, should the re-rendered
  // reply differ from the generated ids: the Gemma template trims it).
  messages.push_back({{"role", "assistant"}, {"content", reply}});
  messages.push_back({{"role", "user"}, {"content", "And what happened on the stormy night after that?"}});
  Reply r2 = post(c, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(r2.status, 200) << r2.raw;
  const int64_t cached = r2.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GE(cached, prompt1 - 1) << r2.raw;
  EXPECT_LT(cached, r2.body["usage"]["prompt_tokens"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(
    Templates, ArchChatTest,
    ::testing::Values(ArchChat{"gemma2-tiny.gguf", "google-gemma-2-2b-it.jinja", "<start_of_turn>user\n"},
                      ArchChat{"phi3-tiny.gguf", "microsoft-Phi-3.5-mini-instruct.jinja", "<|user|>\n"}),
    [](const auto& info) { const std::string m = info.param.model; return m.substr(0, m.find('-')); });

}  // namespace
}  // namespace pc::test
