// Volatile blocks (server/chat/volatile_rules.h): the default rule normalises Claude
// Code's billing header, so two sessions that differ only in its per-session suffix
// share their prompt: the second reads all but the last few prompt tokens from the
// cache, and says which rule fired. Rules files and --volatile-rules off.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "server/chat/volatile_rules.h"
#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

using server::VolatileRules;

std::string billing(const std::string& suffix) {
  return "x-anthropic-billing-header: cc_version=2.1.37." + suffix + "; cc_entrypoint=cli;";
}

TEST(VolatileRules, DefaultNormalisesTheBillingHeader) {
  const VolatileRules rules = VolatileRules::defaults();
  json a = {{{"role", "system"}, {"content", {{{"type", "text"}, {"text", billing("a3f")}},
                                              {{"type", "text"}, {"text", "You are Claude Code."}}}}},
            {{"role", "user"}, {"content", billing("123")}}};
  json b = a;
  b[0]["content"][0]["text"] = billing("9c0");
  EXPECT_EQ(rules.apply(a), std::vector<std::string>{"claude_code_billing_header"});
  EXPECT_EQ(rules.apply(b), std::vector<std::string>{"claude_code_billing_header"});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a[0]["content"][0]["text"], "x-anthropic-billing-header: cc_version=2.1.37; cc_entrypoint=cli;");
  EXPECT_EQ(a[0]["content"][1]["text"], "You are Claude Code.");
  EXPECT_EQ(a[1]["content"], billing("123"));  // a user message: the rule is for system text
  json plain = {{{"role", "system"}, {"content", "cc_version=2.1.37.abc"}}};  // not the header
  EXPECT_TRUE(rules.apply(plain).empty());
  EXPECT_TRUE(VolatileRules::load("off").rules().empty());
}

TEST(VolatileRules, RulesFile) {
  const std::string path = temp_dir() + "/volatile_rules.json";
  std::ofstream(path) << R"([{"name": "session", "role": "user", "starts_with": "session:", "pattern": "[0-9]+", "replace": "N"}])";
  const VolatileRules rules = VolatileRules::load(path);
  json m = {{{"role", "user"}, {"content", "session: 8812 open\nline 2 keeps 77"}}};
  EXPECT_EQ(rules.apply(m), std::vector<std::string>{"session"});
  EXPECT_EQ(m[0]["content"], "session: N open\nline 2 keeps 77");  // the first line only
  std::ofstream(path) << R"([{"name": "x", "pattern": "(unclosed"}])";
  EXPECT_THROW(VolatileRules::load(path), Error);
  EXPECT_THROW(VolatileRules::load(temp_dir() + "/no-such-rules.json"), Error);
}

// Claude Code's request shape: the billing header first, its system prompt and tools
// under cache_control, max_tokens 32000.
json claude_code_request(const std::string& suffix) {
  std::string system_prompt = "You are an interactive CLI tool that helps users with software engineering tasks. ";
  for (int i = 0; i < 12; ++i) system_prompt += "Use the tools available to you to assist the user. ";
  const json tools = {{{"name", "Bash"}, {"description", "Runs a shell command."},
                       {"input_schema", {{"type", "object"}, {"properties", {{"command", {{"type", "string"}}}}}}}},
                      {{"name", "Read"}, {"description", "Reads a file."},
                       {"input_schema", {{"type", "object"}, {"properties", {{"file_path", {{"type", "string"}}}}}}},
                       {"cache_control", {{"type", "ephemeral"}}}}};
  return {{"model", "claude-sonnet-4-5"},
          {"max_tokens", 32000},
          {"temperature", 1},
          {"metadata", {{"user_id", "user_abc_account__session_1"}}},
          {"system", {{{"type", "text"}, {"text", billing(suffix)}},
                      {{"type", "text"}, {"text", "You are Claude Code, Anthropic's official CLI for Claude."},
                       {"cache_control", {{"type", "ephemeral"}}}},
                      {{"type", "text"}, {"text", system_prompt}, {"cache_control", {{"type", "ephemeral"}}}}}},
          {"tools", tools},
          {"messages", {{{"role", "user"},
                         {"content", {{{"type", "text"}, {"text", "<system-reminder>Be brief.</system-reminder>"}},
                                      {{"type", "text"}, {"text", "What does main.cc do?"},
                                       {"cache_control", {{"type", "ephemeral"}}}}}}}}},
          {"test_forced_reply", "It starts the server."}};
}

int64_t prompt_of(const json& u) {
  return u["input_tokens"].get<int64_t>() + u["cache_creation_input_tokens"].get<int64_t>() +
         u["cache_read_input_tokens"].get<int64_t>();
}

std::vector<std::string> serve_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--threads", "1", "--test-hooks",
                                "--any-model", "--chat-template-file",
                                shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(VolatileRules, TwoClaudeCodeSessionsShareTheirPrompt) {
  ServeProcess srv(serve_args());
  auto c = srv.client();
  const Reply first = post(c, "/v1/messages", claude_code_request("a3f"));
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["promptcache"]["volatile_rules_applied"], json::array({"claude_code_billing_header"}));
  const Reply second = post(c, "/v1/messages", claude_code_request("07b"));
  ASSERT_EQ(second.status, 200) << second.raw;
  const int64_t prompt = prompt_of(second.body["usage"]);
  ASSERT_GT(prompt, 300);
  EXPECT_EQ(prompt, prompt_of(first.body["usage"]));
  // All but the last token (always recomputed for its logits) are read from the cache.
  EXPECT_GE(second.body["usage"]["cache_read_input_tokens"].get<int64_t>(), prompt - 4) << second.raw;
}

TEST(VolatileRules, OffTheSessionsDivergeAtTheHeader) {
  ServeProcess srv(serve_args({"--volatile-rules", "off"}));
  auto c = srv.client();
  const Reply first = post(c, "/v1/messages", claude_code_request("a3f"));
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_FALSE(first.body["promptcache"].contains("volatile_rules_applied")) << first.raw;
  const Reply second = post(c, "/v1/messages", claude_code_request("07b"));
  ASSERT_EQ(second.status, 200) << second.raw;
  // The header is the system prompt's first text: the prompts share only what precedes
  // its suffix.
  EXPECT_LT(second.body["usage"]["cache_read_input_tokens"].get<int64_t>(), 100) << second.raw;
  EXPECT_GT(prompt_of(second.body["usage"]), 300);
}

}  // namespace
}  // namespace pc::test
