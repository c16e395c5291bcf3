// Documents sent as text parts of one message are blocks of their own: re-ordered
// inside the message, an approximate request reuses them where the earlier request
// computed them, and an exact one reports them as reusable.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

const char* kSys = "You answer questions about the documents the user gives you.";
const char* kDocs[] = {
    "Document one. Once upon a time there was a little dog named Max who liked to run in the park.\n\n",
    "Document two. Lily had a red ball and she loved to throw it high into the blue sky every day.\n\n",
    "Document three. Tom and his mom went to the big shop to buy some apples and a warm loaf of bread.\n\n",
};
const char* kQuestion = "Who went to the shop?";

json user_with(const std::vector<int>& order) {
  json content = json::array();
  for (int i : order) content.push_back({{"type", "text"}, {"text", kDocs[i]}});
  content.push_back({{"type", "text"}, {"text", kQuestion}});
  return {{"role", "user"}, {"content", content}};
}

json body(const std::vector<int>& order, const std::string& salt, bool approximate) {
  json b = {{"messages", json::array({{{"role", "system"}, {"content", kSys}}, user_with(order)})},
            {"max_tokens", 2},
            {"temperature", 0},
            {"cache_salt", salt}};
  if (approximate) {
    b["cache_reuse"] = "approximate";
    b["cache_reuse_budget"] = 0.0;
  }
  return b;
}

TEST(ContentParts, ReorderedDocumentsAreFoundAsBlocks) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB"});
  auto c = srv.client();
  for (const char* salt : {"exact", "approx"}) {
    const Reply r = post(c, "/v1/chat/completions", body({0, 1, 2}, salt, false));
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  // Exact: the prefix stops at the first moved document; the moved ones are reusable.
  const Reply exact = post(c, "/v1/chat/completions", body({2, 0, 1}, "exact", false));
  ASSERT_EQ(exact.status, 200) << exact.raw;
  const json& e = exact.body["promptcache"];
  EXPECT_EQ(e["approximate_tokens"], 0);
  const int64_t doc_bytes = int64_t(std::string(kDocs[0]).size() + std::string(kDocs[1]).size());
  // Byte-level pieces: at least a token per two bytes of the two documents that moved.
  EXPECT_GE(e["reusable_tokens"].get<int64_t>(), doc_bytes / 2) << exact.raw;
  EXPECT_EQ(e["miss"]["reason"], "messages_changed") << exact.raw;
  EXPECT_EQ(e["miss"]["tokens"], e["reusable_tokens"]) << exact.raw;

  // Approximate: all three documents come from the first request's KV.
  const Reply approx = post(c, "/v1/chat/completions", body({2, 0, 1}, "approx", true));
  ASSERT_EQ(approx.status, 200) << approx.raw;
  const json& a = approx.body["promptcache"];
  EXPECT_GE(a["approximate_tokens"].get<int64_t>(), e["reusable_tokens"].get<int64_t>()) << approx.raw;
  EXPECT_LT(a["fresh_tokens"].get<int64_t>(), e["fresh_tokens"].get<int64_t>() / 2) << approx.raw;
}

}  // namespace
}  // namespace pc::test
