// Conversation-exact prompts (server/chat/conversation.h) in process: the ids of a
// chat with a remembered reply spliced in.
#include <gtest/gtest.h>

#include <map>

#include "gguf/gguf.h"
#include "server/chat/conversation.h"
#include "server/chat/reply_store.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc::test {
namespace {

using nlohmann::json;

// stories260K is a SentencePiece vocabulary with a space prefix and no ChatML
// special tokens, so the text after a reply ("<|im_end|>\n...") is plain text
// that continues the reply: it must not get the prefix an input's start gets.
TEST(Conversation, TextAfterSplicedReplyContinuesIt) {
  auto f = GgufFile::open(shared_dir() + "/models/stories260K.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  const ChatTemplate tmpl(read_file(shared_dir() + "/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"));
  server::ConversationMemory memory;

  json messages = json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  const server::ChatPrompt t1 = server::build_chat_prompt(tmpl, *tok, memory, "ns", messages, json::object());
  ASSERT_FALSE(t1.ids.empty());
  EXPECT_EQ(tok->decode(t1.ids), tmpl.apply(messages, true));

  // The model's reply, as generation remembers it.
  const std::string reply = "Once upon a time there was a cat.";
  server::RememberedReply r;
  r.ids = tok->encode_continuation(reply, false);
  r.context = t1.ids;
  r.kv_tokens = int64_t(t1.ids.size() + r.ids.size()) - 1;
  memory.remember("ns", reply, r);

  messages.push_back({{"role", "assistant"}, {"content", reply}});
  messages.push_back({{"role", "user"}, {"content", "And then?"}});
  const server::ChatPrompt t2 = server::build_chat_prompt(tmpl, *tok, memory, "ns", messages, json::object());
  EXPECT_EQ(t2.spliced, 1);
  EXPECT_TRUE(t2.reason.empty()) << t2.reason;
  EXPECT_EQ(t2.diverged_at, -1);
  // Turn 2 starts with what the model saw and generated in turn 1 ...
  std::vector<int32_t> seen = t1.ids;
  seen.insert(seen.end(), r.ids.begin(), r.ids.end());
  ASSERT_GT(t2.ids.size(), seen.size());
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), t2.ids.begin()));
  // ... and its ids spell the rendered text exactly: no space was inserted
  // after the reply.
  EXPECT_EQ(tok->decode(t2.ids), tmpl.apply(messages, true));
  EXPECT_NE(tok->token_to_piece(t2.ids[seen.size()]).front(), ' ');

  // A reply that is not remembered is re-tokenized with the whole text.
  server::ConversationMemory empty;
  const server::ChatPrompt cold = server::build_chat_prompt(tmpl, *tok, empty, "ns", messages, json::object());
  EXPECT_EQ(cold.spliced, 0);
  EXPECT_EQ(tok->decode(cold.ids), tmpl.apply(messages, true));
}

// A tool-call reply comes back re-serialized (the template's JSON spacing, arguments
// sent as a JSON string): found by its call id, the whole turn is spliced, so the next
// prompt starts with what the model saw and generated. When an earlier message changed
// or the id is unknown, nothing is spliced.
TEST(Conversation, ToolCallTurnSplicedByCallId) {
  auto f = GgufFile::open(shared_dir() + "/models/stories260K.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  const ChatTemplate tmpl(read_file(shared_dir() + "/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"));
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
  const json extra = {{"tools", tools}};
  server::ConversationMemory memory;
  json messages = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const server::ChatPrompt t1 =
      server::build_chat_prompt(tmpl, *tok, memory, "ns", messages, extra, server::ToolFormat::kQwen);

  // The model wrote compact JSON; the template renders `{"city": "Paris"}`.
  const std::string reply = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>";
  server::RememberedReply r;
  r.ids = tok->encode_continuation(reply, false);
  r.context = t1.ids;
  r.kv_tokens = int64_t(t1.ids.size() + r.ids.size());
  memory.remember_calls("ns", {"call_1"}, r);

  const json call = {{"id", "call_1"}, {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}};
  messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny"}});
  const json parsed = server::parse_tool_arguments(messages);
  EXPECT_TRUE(parsed[1]["tool_calls"][0]["function"]["arguments"].is_object());
  EXPECT_EQ(parsed[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  const server::ChatPrompt t2 =
      server::build_chat_prompt(tmpl, *tok, memory, "ns", parsed, extra, server::ToolFormat::kQwen);
  EXPECT_EQ(t2.spliced, 1);
  EXPECT_TRUE(t2.reason.empty()) << t2.reason;
  std::vector<int32_t> seen = t1.ids;
  seen.insert(seen.end(), r.ids.begin(), r.ids.end());
  ASSERT_GT(t2.ids.size(), seen.size());
  EXPECT_TRUE(std::equal(seen.begin(), seen.end(), t2.ids.begin()));
  // After the spliced turn: the template's end of turn and the tool result, as rendered.
  const std::string after = tok->decode(std::vector<int32_t>(t2.ids.begin() + seen.size(), t2.ids.end()));
  EXPECT_EQ(after, "<|im_end|>\n<|im_start|>user\n<tool_response>\nSunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t2.token_offsets.size(), t2.ids.size() + 1);

  // The question before the call was edited: the turn is tokenized as rendered.
  json edited = parsed;
  edited[0]["content"] = "Weather in Rome?";
  const server::ChatPrompt t3 =
      server::build_chat_prompt(tmpl, *tok, memory, "ns", edited, extra, server::ToolFormat::kQwen);
  EXPECT_EQ(t3.spliced, 0);
  EXPECT_EQ(tok->decode(t3.ids), tmpl.apply(edited, true, extra));
  // An id the server did not generate.
  json unknown = parsed;
  unknown[1]["tool_calls"][0]["id"] = "call_2";
  const server::ChatPrompt t4 =
      server::build_chat_prompt(tmpl, *tok, memory, "ns", unknown, extra, server::ToolFormat::kQwen);
  EXPECT_EQ(t4.spliced, 0);
  EXPECT_EQ(t4.reason, "unknown_reply");
  // Arguments that are no JSON object stay strings.
  json odd = messages;
  odd[1]["tool_calls"][0]["function"]["arguments"] = "not json";
  EXPECT_EQ(server::parse_tool_arguments(odd)[1]["tool_calls"][0]["function"]["arguments"], "not json");
}

// A reply store in a map, standing in for Redis.
class MapStore : public server::ReplyStore {
 public:
  std::optional<server::RememberedReply> load(const std::string& key) override {
    ++loads;
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return server::decode_reply(key, it->second);
  }
  void store(const std::string& key, const server::RememberedReply& r) override {
    ++stores;
    values[key] = server::encode_reply(key, r);
  }
  std::map<std::string, std::vector<uint8_t>> values;
  int loads = 0, stores = 0;
};

// Replies one server remembered are found by another through the shared store (and
// kept locally after that); reshare() stores them all again.
TEST(Conversation, SharedStoreAnswersALocalMiss) {
  MapStore shared;
  server::ConversationMemory a, b;
  a.set_shared(&shared);
  b.set_shared(&shared);
  server::RememberedReply r;
  r.ids = {5, 6, 7};
  r.tail = "!";
  r.context = {1, 2, 3, 4};
  r.kv_tokens = 6;
  a.remember("tenant", "Once upon a time", r);
  a.remember_calls("tenant", {"call_1", "call_2"}, r);
  EXPECT_EQ(shared.stores, 2);
  const auto found = b.find("tenant", "Once upon a time");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->ids, r.ids);
  EXPECT_EQ(found->tail, r.tail);
  EXPECT_EQ(found->context, r.context);
  EXPECT_EQ(found->kv_tokens, r.kv_tokens);
  EXPECT_TRUE(b.find_calls("tenant", {"call_1", "call_2"}));
  EXPECT_FALSE(b.find_calls("tenant", {"call_1"}));
  EXPECT_FALSE(b.find("other tenant", "Once upon a time"));  // namespaced
  const int loads = shared.loads;
  EXPECT_TRUE(b.find("tenant", "Once upon a time"));  // now local
  EXPECT_EQ(shared.loads, loads);
  EXPECT_EQ(b.size(), 2u);
  shared.values.clear();  // the store lost everything
  a.reshare();
  EXPECT_EQ(shared.values.size(), 2u);
}

// A stored value read under another key, or cut short, is no reply.
TEST(Conversation, ReplyValuesAreCheckedWhenDecoded) {
  server::RememberedReply r;
  r.ids = {9, 8};
  r.context = {1};
  const std::vector<uint8_t> v = server::encode_reply("k1", r);
  EXPECT_TRUE(server::decode_reply("k1", v));
  EXPECT_FALSE(server::decode_reply("k2", v));
  for (size_t n = 0; n < v.size(); ++n)
    EXPECT_FALSE(server::decode_reply("k1", std::vector<uint8_t>(v.begin(), v.begin() + n))) << n;
  EXPECT_NE(server::RedisReplyStore::key_name("model-a", "k1"), server::RedisReplyStore::key_name("model-b", "k1"));
}

}  // namespace
}  // namespace pc::test
