// A reply's thinking returned apart, against a real server with a thinking template
// (Qwen3, DeepSeek-R1) and forced replies (--test-hooks): message.reasoning_content and
// delta.reasoning_content on chat completions, thinking blocks on /v1/messages when the
// request enables thinking, reasoning_format none / --reasoning-format, and reasoning
// sent back in history rendered as the template renders it (never a 400).
#include <gtest/gtest.h>

#include <sstream>

#include "server_fixture.h"

namespace pc::test {
namespace {

const char* kForced = "<think>\nThe user greets me.\n</think>\n\nHello there.";

std::vector<std::string> args(const char* tmpl, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--test-hooks",
                                "--chat-template-file", shared_path(tmpl)};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

json chat_body(const char* forced) {
  return {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 200}, {"temperature", 0},
          {"test_forced_reply", forced}};
}

// The streamed deltas' reasoning_content and content, each concatenated.
std::pair<std::string, std::string> streamed_parts(const std::string& raw) {
  std::string reasoning, content;
  for (const std::string& e : sse_events(raw)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    if (j["choices"].empty()) continue;
    const json& d = j["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
  }
  return {reasoning, content};
}

TEST(Thinking, Qwen3ReasoningContentWholeAndStreamed) {
  ServeProcess srv(args("templates-2026/Qwen-Qwen3-0.6B.jinja"));
  auto c = srv.client();
  json body = chat_body(kForced);
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& m = r.body["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "The user greets me.") << r.raw;
  EXPECT_EQ(m["content"], "Hello there.") << r.raw;
  body["stream"] = true;
  const Reply s = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_EQ(streamed_parts(s.raw), std::make_pair(std::string("The user greets me."), std::string("Hello there.")));
  // reasoning_format none: the thinking stays in the content, tags and all.
  body["stream"] = false;
  body["reasoning_format"] = "none";
  const Reply none = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_EQ(none.body["choices"][0]["message"]["content"], kForced) << none.raw;
  EXPECT_FALSE(none.body["choices"][0]["message"].contains("reasoning_content")) << none.raw;
  body["reasoning_format"] = "deepseek-legacy";
  const Reply bad = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "reasoning_format") << bad.raw;
  // A reply without a block is all content.
  const Reply plain = post(c, "/v1/chat/completions", chat_body("Just text."));
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_EQ(plain.body["choices"][0]["message"]["content"], "Just text.");
  EXPECT_FALSE(plain.body["choices"][0]["message"].contains("reasoning_content"));
}

// /v1/responses: the thinking is a reasoning item before the message (whole and
// streamed), counted in reasoning_tokens; a reasoning item sent back begins the assistant
// turn it precedes (its text is that turn's reasoning_content); reasoning.effort sets
// the template's switch (Qwen3: enable_thinking off for "none").
TEST(Thinking, ResponsesReasoningItems) {
  ServeProcess srv(args("templates/Qwen-Qwen3-0.6B.jinja"));
  auto c = srv.client();
  json body = {{"input", "Hi"}, {"max_output_tokens", 200}, {"temperature", 0}, {"test_forced_reply", kForced}};
  const Reply r = post(c, "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& out = r.body["output"];
  ASSERT_EQ(out.size(), 2u) << r.raw;
  EXPECT_EQ(out[0]["type"], "reasoning") << r.raw;
  EXPECT_EQ(out[0]["content"][0]["type"], "reasoning_text") << r.raw;
  EXPECT_EQ(out[0]["content"][0]["text"], "The user greets me.") << r.raw;
  EXPECT_EQ(out[1]["type"], "message") << r.raw;
  EXPECT_EQ(out[1]["content"][0]["text"], "Hello there.") << r.raw;
  EXPECT_GT(r.body["usage"]["output_tokens_details"]["reasoning_tokens"].get<int64_t>(), 0) << r.raw;
  EXPECT_LT(r.body["usage"]["output_tokens_details"]["reasoning_tokens"].get<int64_t>(),
            r.body["usage"]["output_tokens"].get<int64_t>()) << r.raw;

  body["stream"] = true;
  const Reply s = post(c, "/v1/responses", body);
  ASSERT_EQ(s.status, 200) << s.raw;
  std::string reasoning, text, order;
  json completed;
  std::istringstream in(s.raw);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    const json e = json::parse(line.substr(6));
    const std::string type = e["type"];
    if (type == "response.reasoning_text.delta") reasoning += e["delta"].get<std::string>();
    if (type == "response.output_text.delta") text += e["delta"].get<std::string>();
    if (type == "response.output_item.added") order += e["item"]["type"].get<std::string>() + " ";
    if (type == "response.completed") completed = e["response"];
  }
  EXPECT_EQ(reasoning, "The user greets me.") << s.raw;
  EXPECT_EQ(text, "Hello there.") << s.raw;
  EXPECT_EQ(order, "reasoning message ") << s.raw;
  ASSERT_EQ(completed["output"].size(), 2u) << s.raw;
  EXPECT_EQ(completed["output"][0]["content"], out[0]["content"]) << s.raw;
  EXPECT_EQ(completed["output"][1]["content"], out[1]["content"]) << s.raw;

  // Sent back: the reasoning is the next assistant turn's reasoning_content, which the
  // template renders for turns after the last user query (Qwen3).
  json back = {{"input", json::array({{{"role", "user"}, {"content", "Hi"}},
                                      {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()},
                                       {"content", json::array({{{"type", "reasoning_text"}, {"text", "Deep thought."}}})}},
                                      {{"role", "assistant"}, {"content", "Hello."}}})},
               {"max_output_tokens", 4}, {"temperature", 0}, {"test_forced_reply", "ok"}};
  const Reply b = post(c, "/v1/responses", back);
  ASSERT_EQ(b.status, 200) << b.raw;
  // A lone reasoning item (no message or call after it) is no turn: the same prompt as without it.
  json lone = back;
  lone["input"].erase(2);
  json plain = lone;
  plain["input"].erase(1);
  const Reply l = post(c, "/v1/responses", lone), p = post(c, "/v1/responses", plain);
  ASSERT_EQ(l.status, 200) << l.raw;
  EXPECT_EQ(l.body["usage"]["input_tokens"], p.body["usage"]["input_tokens"]) << l.raw << p.raw;
  json bad = back;
  bad["input"][1]["content"] = "x";
  const Reply bb = post(c, "/v1/responses", bad);
  EXPECT_EQ(bb.status, 400) << bb.raw;
  EXPECT_EQ(bb.body["error"]["param"], "input[1].content") << bb.raw;

  // reasoning.effort "none" turns Qwen3's thinking off: the prompt ends with an empty block.
  json off = {{"input", "Hi"}, {"max_output_tokens", 4}, {"temperature", 0}, {"test_forced_reply", "ok"},
              {"reasoning", {{"effort", "none"}}}};
  json on = off;
  on["reasoning"]["effort"] = "high";
  const Reply ro = post(c, "/v1/responses", off), rn = post(c, "/v1/responses", on);
  ASSERT_EQ(ro.status, 200) << ro.raw;
  ASSERT_EQ(rn.status, 200) << rn.raw;
  EXPECT_GT(ro.body["usage"]["input_tokens"].get<int64_t>(), rn.body["usage"]["input_tokens"].get<int64_t>())
      << ro.raw << rn.raw;
  off["reasoning"]["effort"] = "maximal";
  const Reply re = post(c, "/v1/responses", off);
  EXPECT_EQ(re.status, 400) << re.raw;
  EXPECT_EQ(re.body["error"]["param"], "reasoning.effort") << re.raw;
}

TEST(Thinking, ServerReasoningFormatNone) {
  ServeProcess srv(args("templates-2026/Qwen-Qwen3-0.6B.jinja", {"--reasoning-format", "none"}));
  auto c = srv.client();
  const Reply r = post(c, "/v1/chat/completions", chat_body(kForced));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], kForced) << r.raw;
  json body = chat_body(kForced);
  body["reasoning_format"] = "deepseek";  // the request's own wins
  const Reply d = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(d.body["choices"][0]["message"]["reasoning_content"], "The user greets me.") << d.raw;
}

TEST(Thinking, ReasoningInHistoryRenderedAsTheTemplateDoes) {
  ServeProcess srv(args("templates-2026/Qwen-Qwen3-0.6B.jinja"));
  auto c = srv.client();
  // Qwen3 renders the reasoning of an assistant turn after the last user query.
  const json messages = {{{"role", "user"}, {"content", "Hi"}},
                         {{"role", "assistant"}, {"content", "Hello there."}, {"reasoning_content", "Greeting."}}};
  const Reply p = post(c, "/apply-template", {{"messages", messages}, {"add_generation_prompt", false}});
  ASSERT_EQ(p.status, 200) << p.raw;
  EXPECT_NE(p.body["prompt"].get<std::string>().find("<think>\nGreeting.\n</think>\n\nHello there."), std::string::npos)
      << p.raw;
  // Anthropic: a thinking block of an assistant turn that called a tool is its
  // reasoning_content (rendered: the tool result is no new user query).
  json turn = {{"role", "assistant"},
               {"content", {{{"type", "thinking"}, {"thinking", "I should look it up."}, {"signature", "sig"}},
                            {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "f"}, {"input", json::object()}}}}};
  const json tools = {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}};
  auto history = [&](const json& assistant) {
    return json{{"tools", tools},
                {"messages", {{{"role", "user"}, {"content", "Look it up"}}, assistant,
                              {{"role", "user"},
                               {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "42"}}}}}}}};
  };
  const Reply with = post(c, "/v1/messages/count_tokens", history(turn));
  ASSERT_EQ(with.status, 200) << with.raw;
  json no_thinking = turn;
  no_thinking["content"].erase(0);
  const Reply without = post(c, "/v1/messages/count_tokens", history(no_thinking));
  ASSERT_EQ(without.status, 200) << without.raw;
  EXPECT_GT(with.body["input_tokens"].get<int64_t>(), without.body["input_tokens"].get<int64_t>() + 10);
  json redacted = turn;
  redacted["content"][0] = {{"type", "redacted_thinking"}, {"data", "abc"}};
  json req = history(redacted);
  req["max_tokens"] = 4;
  EXPECT_EQ(post(c, "/v1/messages", req).status, 200);
}

TEST(Thinking, AnthropicThinkingBlocks) {
  ServeProcess srv(args("templates-2026/Qwen-Qwen3-0.6B.jinja"));
  auto c = srv.client();
  json body = {{"max_tokens", 200}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"test_forced_reply", kForced},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
  const Reply r = post(c, "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["content"].size(), 2u) << r.raw;
  EXPECT_EQ(r.body["content"][0]["type"], "thinking");
  EXPECT_EQ(r.body["content"][0]["thinking"], "The user greets me.");
  EXPECT_EQ(r.body["content"][1]["type"], "text");
  EXPECT_EQ(r.body["content"][1]["text"], "Hello there.");
  // Streamed: a thinking block (thinking_delta), then a text block.
  body["stream"] = true;
  auto s = c.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(s);
  std::istringstream in(s->body);
  std::string line, thinking, text;
  std::vector<std::string> starts;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const json e = json::parse(line.substr(6));
    if (e["type"] == "content_block_start") starts.push_back(e["content_block"]["type"]);
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "thinking_delta") thinking += e["delta"]["thinking"];
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "text_delta") text += e["delta"]["text"];
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"thinking", "text"})) << s->body;
  EXPECT_EQ(thinking, "The user greets me.");
  EXPECT_EQ(text, "Hello there.");
  // Thinking not enabled: the thinking is not shown (nor left in the text).
  body.erase("thinking");
  body["stream"] = false;
  const Reply off = post(c, "/v1/messages", body);
  ASSERT_EQ(off.status, 200) << off.raw;
  ASSERT_EQ(off.body["content"].size(), 1u) << off.raw;
  EXPECT_EQ(off.body["content"][0]["text"], "Hello there.");
  body["thinking"] = {{"type", "sometimes"}};
  const Reply bad = post(c, "/v1/messages", body);
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["type"], "error") << bad.raw;
}

TEST(Thinking, DeepSeekPromptOpensTheBlock) {
  ServeProcess srv(args("templates-2026/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"));
  auto c = srv.client();
  // enable_thinking: the generation prompt ends with "<think>\n", so the reply starts
  // inside the block.
  json body = chat_body("Two and two.\n</think>\n\nFour.");
  body["chat_template_kwargs"] = {{"enable_thinking", true}};
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["reasoning_content"], "Two and two.") << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], "Four.") << r.raw;
  // This template drops earlier reasoning: reasoning_content in history is accepted
  // and rendered as it renders none.
  const json with = {{"messages", {{{"role", "user"}, {"content", "2+2?"}},
                                   {{"role", "assistant"}, {"content", "Four."}, {"reasoning_content", "Two and two."}},
                                   {{"role", "user"}, {"content", "Thanks"}}}}};
  json without = with;
  without["messages"][1].erase("reasoning_content");
  const Reply a = post(c, "/apply-template", with), b = post(c, "/apply-template", without);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["prompt"], b.body["prompt"]);
}

}  // namespace
}  // namespace pc::test
