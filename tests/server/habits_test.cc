// What agent SDKs and llama-server clients expect of a server, against a real
// `promptcache serve`: the developer role, how text parts are joined, the routes
// without /v1, continuing a final assistant message, and the server's sampling
// defaults (--temp, -n, ...).
#include <gtest/gtest.h>

#include <string>

#include "server_fixture.h"

namespace pc::test {
namespace {

const std::string kQwenDefault = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

ServeProcess qwen_server(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                                   shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ServeProcess(args);
}

std::string rendered(httplib::Client& c, const json& body) {
  const Reply r = post(c, "/apply-template", body);
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body.value("prompt", "");
}

int64_t prompt_tokens(httplib::Client& c, const json& messages) {
  const Reply r = post(c, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body["usage"].value("prompt_tokens", int64_t(-1));
}

// The Qwen2.5 template knows no developer role: it used to drop the message and
// write its own default system prompt instead.
TEST(Habits, DeveloperRoleIsRenderedAsSystem) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const json dev = json::array({{{"role", "developer"}, {"content", "Answer in one word."}},
                                {{"role", "user"}, {"content", "Hi"}}});
  const std::string p = rendered(c, {{"messages", dev}});
  EXPECT_EQ(p.rfind("<|im_start|>system\nAnswer in one word.<|im_end|>\n", 0), 0u) << p;
  EXPECT_EQ(p.find(kQwenDefault), std::string::npos) << p;
  json sys = dev;
  sys[0]["role"] = "system";
  EXPECT_EQ(prompt_tokens(c, dev), prompt_tokens(c, sys));
}

TEST(Habits, TextPartsAreJoinedWithNewlines) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const json parts = json::array({{{"role", "user"},
                                   {"content", json::array({{{"type", "text"}, {"text", "What is"}},
                                                            {{"type", "text"}, {"text", "the best book"}}})}}});
  const std::string p = rendered(c, {{"messages", parts}});
  EXPECT_NE(p.find("<|im_start|>user\nWhat is\nthe best book<|im_end|>"), std::string::npos) << p;
  const json text = json::array({{{"role", "user"}, {"content", "What is\nthe best book"}}});
  EXPECT_EQ(prompt_tokens(c, parts), prompt_tokens(c, text));
}

TEST(Habits, RoutesWithoutV1) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const Reply models = get(c, "/models");
  ASSERT_EQ(models.status, 200) << models.raw;
  const std::string id = models.body["data"][0]["id"];
  EXPECT_EQ(get(c, "/v1/models").body["data"][0]["id"], id);
  const Reply one = get(c, "/models/" + id);
  EXPECT_EQ(one.status, 200) << one.raw;
  EXPECT_EQ(one.body["id"], id);
  EXPECT_EQ(get(c, "/models/no-such-model").status, 404);
  const Reply chat = post(c, "/chat/completions",
                          {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                           {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(chat.body["object"], "chat.completion");
  const Reply text = post(c, "/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_EQ(text.status, 200) << text.raw;
  EXPECT_EQ(text.body["object"], "text_completion");
  EXPECT_EQ(text.body["usage"]["completion_tokens"], 2);
}

json story_messages() {
  return json::array({{{"role", "user"}, {"content", "Tell me a story."}},
                      {{"role", "assistant"}, {"content", "Once upon a time"}}});
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(Habits, ContinueFinalMessageAndGenerationPrompt) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const std::string closed = rendered(c, {{"messages", story_messages()}});
  EXPECT_TRUE(ends_with(closed, "Once upon a time<|im_end|>\n<|im_start|>assistant\n")) << closed;
  const std::string cont = rendered(c, {{"messages", story_messages()}, {"continue_final_message", true}});
  EXPECT_TRUE(ends_with(cont, "<|im_start|>assistant\nOnce upon a time")) << cont;
  EXPECT_EQ(closed.rfind(cont, 0), 0u) << cont;  // the same rendering, cut after the content
  const std::string no_agp = rendered(c, {{"messages", story_messages()}, {"add_generation_prompt", false}});
  EXPECT_TRUE(ends_with(no_agp, "Once upon a time<|im_end|>\n")) << no_agp;
  // An empty final message: the assistant's turn is opened and nothing more.
  json empty = story_messages();
  empty[1]["content"] = "";
  const std::string opened = rendered(c, {{"messages", empty}, {"continue_final_message", true}});
  EXPECT_TRUE(ends_with(opened, "Tell me a story.<|im_end|>\n<|im_start|>assistant\n")) << opened;

  // Over /v1/chat/completions: the continued prompt has fewer tokens than the closed one.
  json body = {{"messages", story_messages()}, {"max_tokens", 3}, {"temperature", 0}};
  const Reply r_closed = post(c, "/v1/chat/completions", body);
  body["continue_final_message"] = true;
  const Reply r_cont = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r_closed.status, 200) << r_closed.raw;
  ASSERT_EQ(r_cont.status, 200) << r_cont.raw;
  const int64_t n_cont = r_cont.body["usage"]["prompt_tokens"];
  EXPECT_LT(n_cont, r_closed.body["usage"]["prompt_tokens"].get<int64_t>()) << r_cont.raw;
  const Reply tokens = post(c, "/tokenize", {{"content", cont}, {"add_special", true}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  EXPECT_EQ(n_cont, int64_t(tokens.body["tokens"].size())) << tokens.raw;

  // Anthropic: a final assistant message is a prefill, continued the same way.
  const Reply msg = post(c, "/v1/messages", {{"messages", story_messages()}, {"max_tokens", 3}, {"temperature", 0}});
  ASSERT_EQ(msg.status, 200) << msg.raw;
  const json& u = msg.body["usage"];
  EXPECT_EQ(u["input_tokens"].get<int64_t>() + u["cache_creation_input_tokens"].get<int64_t>() +
                u["cache_read_input_tokens"].get<int64_t>(),
            n_cont)
      << msg.raw;
}

TEST(Habits, ContinueFinalMessageErrorsNameTheFields) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const Reply both = post(c, "/v1/chat/completions", {{"messages", story_messages()},
                                                      {"continue_final_message", true},
                                                      {"add_generation_prompt", true}});
  EXPECT_EQ(both.status, 400) << both.raw;
  EXPECT_EQ(both.body["error"]["param"], "continue_final_message") << both.raw;
  const std::string msg = both.body["error"].value("message", "");
  EXPECT_NE(msg.find("add_generation_prompt"), std::string::npos) << msg;
  const Reply user_last = post(c, "/v1/chat/completions",
                               {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                {"continue_final_message", true}});
  EXPECT_EQ(user_last.status, 400) << user_last.raw;
  EXPECT_EQ(user_last.body["error"]["param"], "continue_final_message") << user_last.raw;
  const Reply not_bool = post(c, "/v1/chat/completions", {{"messages", story_messages()},
                                                          {"add_generation_prompt", "no"}});
  EXPECT_EQ(not_bool.status, 400) << not_bool.raw;
  EXPECT_EQ(not_bool.body["error"]["param"], "add_generation_prompt") << not_bool.raw;
}

TEST(Habits, AnthropicCountTokensAndErrorShape) {
  ServeProcess srv = qwen_server();
  auto c = srv.client();
  const json messages = json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  const Reply count = post(c, "/v1/messages/count_tokens", {{"messages", messages}, {"system", "Be brief."}});
  ASSERT_EQ(count.status, 200) << count.raw;
  const Reply msg = post(c, "/v1/messages", {{"messages", messages}, {"system", "Be brief."}, {"max_tokens", 1}});
  ASSERT_EQ(msg.status, 200) << msg.raw;
  const json& u = msg.body["usage"];
  EXPECT_EQ(count.body["input_tokens"], u["input_tokens"].get<int64_t>() +
                                            u["cache_creation_input_tokens"].get<int64_t>() +
                                            u["cache_read_input_tokens"].get<int64_t>())
      << count.raw << msg.raw;
  // Errors of every /v1/messages route are Anthropic-shaped.
  const Reply bad = post(c, "/v1/messages/count_tokens", {{"messages", "no"}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["type"], "error") << bad.raw;
  EXPECT_EQ(bad.body["error"]["type"], "invalid_request_error") << bad.raw;
  const Reply unknown = post(c, "/v1/messages/batches", {{"requests", json::array()}});
  EXPECT_EQ(unknown.status, 404) << unknown.raw;
  EXPECT_EQ(unknown.body["type"], "error") << unknown.raw;
  EXPECT_EQ(unknown.body["error"]["type"], "not_found_error") << unknown.raw;
  EXPECT_TRUE(unknown.body["error"]["message"].is_string()) << unknown.raw;
  const Reply wrong_method = get(c, "/v1/messages");
  EXPECT_EQ(wrong_method.status, 405) << wrong_method.raw;
  EXPECT_EQ(wrong_method.body["type"], "error") << wrong_method.raw;
  // Other routes keep the OpenAI shape.
  const Reply openai = get(c, "/v1/nothing");
  EXPECT_EQ(openai.status, 404);
  EXPECT_TRUE(openai.body["error"].contains("code")) << openai.raw;
}

// --temp 0 -n 5: a request that sets neither gets 5 greedy tokens.
TEST(Habits, ServerSamplingDefaults) {
  ServeProcess srv = qwen_server({"--temp", "0", "-n", "5", "--top-k", "7", "--top-p", "0.5", "--seed", "42"});
  auto c = srv.client();
  const Reply props = get(c, "/props");
  ASSERT_EQ(props.status, 200) << props.raw;
  const json& params = props.body["default_generation_settings"]["params"];
  EXPECT_EQ(params["temperature"], 0.0) << params;
  EXPECT_EQ(params["n_predict"], 5) << params;
  EXPECT_EQ(params["top_k"], 7) << params;
  EXPECT_EQ(params["top_p"], 0.5) << params;
  EXPECT_EQ(params["seed"], 42) << params;
  const json body = {{"prompt", "Once upon a time"}};
  const Reply a = post(c, "/v1/completions", body);
  const Reply b = post(c, "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  EXPECT_EQ(a.body["usage"]["completion_tokens"], 5) << a.raw;
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
  // A request's own fields still win.
  const Reply own = post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 2}});
  EXPECT_EQ(own.body["usage"]["completion_tokens"], 2) << own.raw;
}

TEST(Habits, BadSamplingDefaultIsRefusedAtStart) {
  try {
    ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--top-p", "0"});
    ADD_FAILURE() << "serve started with --top-p 0";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--top-p"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pc::test
