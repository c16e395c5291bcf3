// The official `openai` and `@anthropic-ai/sdk` npm packages, and the agent SDKs over the
// Responses API, against a real server (tests/server/js).
// Needs node and `npm ci` run in tests/server/js (scripts/test.sh does it); fails,
// saying what to run, when either is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "server_fixture.h"

namespace pc::test {
namespace {

TEST(ServerJs, OpenAiNpmClient) {
  const std::filesystem::path js = std::filesystem::path(__FILE__).parent_path() / "js";
  // scripts/test.sh installs node and the client (npm ci); missing is a failure.
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed (scripts/setup.sh)";
  ASSERT_TRUE(std::filesystem::exists(js / "node_modules" / "openai"))
      << "run `npm ci` in " << js.string() << " (scripts/test.sh does)";
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--test-hooks", "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")});
  const std::string cmd = "cd '" + js.string() + "' && PC_SERVER_URL=" + srv.url() +
                          "/v1 node openai_client_test.mjs 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ServerJs, AnthropicNpmClient) {
  const std::filesystem::path js = std::filesystem::path(__FILE__).parent_path() / "js";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed (scripts/setup.sh)";
  ASSERT_TRUE(std::filesystem::exists(js / "node_modules" / "@anthropic-ai" / "sdk"))
      << "run `npm ci` in " << js.string() << " (scripts/test.sh does)";
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--test-hooks", "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")});
  // The client appends /v1/messages to its base URL.
  const std::string cmd = "cd '" + js.string() + "' && PC_SERVER_URL=" + srv.url() +
                          " node anthropic_client_test.mjs 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// POST /v1/responses with openai's responses.*, @openai/agents, the AI SDK (openai()) and
// LangChain's ChatOpenAI (useResponsesApi).
TEST(ServerJs, ResponsesNpmClients) {
  const std::filesystem::path js = std::filesystem::path(__FILE__).parent_path() / "js";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed (scripts/setup.sh)";
  for (const char* pkg : {"openai", "@openai/agents", "ai", "@ai-sdk/openai", "@langchain/openai"})
    ASSERT_TRUE(std::filesystem::exists(js / "node_modules" / pkg))
        << "run `npm ci` in " << js.string() << " (scripts/test.sh does)";
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--test-hooks", "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja")});
  const std::string cmd = "cd '" + js.string() + "' && PC_SERVER_URL=" + srv.url() +
                          "/v1 node responses_clients_test.mjs 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Structured output through the AI SDK (generateObject on openai(), openai.chat() and
// @ai-sdk/anthropic) and LangChain (withStructuredOutput on ChatOpenAI and ChatAnthropic).
TEST(ServerJs, StructuredOutputNpmClients) {
  const std::filesystem::path js = std::filesystem::path(__FILE__).parent_path() / "js";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed (scripts/setup.sh)";
  for (const char* pkg : {"ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "@langchain/openai", "@langchain/anthropic"})
    ASSERT_TRUE(std::filesystem::exists(js / "node_modules" / pkg))
        << "run `npm ci` in " << js.string() << " (scripts/test.sh does)";
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--test-hooks", "--chat-template-file",
                    shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja")});
  const std::string cmd = "cd '" + js.string() + "' && PC_SERVER_URL=" + srv.url() +
                          " node structured_clients_test.mjs 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace pc::test
