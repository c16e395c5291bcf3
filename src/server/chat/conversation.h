// Conversation-exact caching.
//
// The KV the engine caches for a finished chat turn is that of the exact token ids
// the model saw and generated. Re-tokenizing the reply's text next turn may give
// other ids (tokenization is not unique), and then the next turn would miss from
// the reply on. So the server remembers, per namespace, reply text → the ids it
// generated, and renders the next request as
//
//   rendered:  [ text₀ ][ reply₁ ][ text₁ ][ reply₂ ][ text₂ ]
//   tokens:    enc(text₀) ids₁  enc(text₁)   ids₂  enc(text₂)
//
// where enc() tokenizes each text piece on its own (special tokens parsed, BOS
// and the SentencePiece space prefix only at the start: a piece after a reply
// continues the text, encode_continuation()). Piece boundaries of one turn are
// a refinement of the next turn's, so turn k's prompt starts with turn k-1's
// prompt + reply.
//
// When the template re-renders history differently from what the model saw
// (Qwen3 drops earlier <think> blocks), the token sequences differ; the first
// differing token is reported as the divergence point.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/kv_namespace.h"
#include "server/chat/chat_render.h"
#include "server/chat/request_structure.h"
#include "server/chat/tool_calls.h"

namespace pc {
class Tokenizer;
class ChatTemplate;
}  // namespace pc

namespace pc::server {

// What the model saw around one reply it generated.
struct RememberedReply {
  std::vector<int32_t> ids;      // generated ids whose text is the reply (minus tail)
  std::string tail;              // reply text after those ids (a stop string cut a token)
  std::vector<int32_t> context;  // prompt ids the reply followed
  int64_t kv_tokens = 0;         // tokens of context + ids whose KV the engine cached
  uint64_t last_use = 0;
};

// Where replies are also kept beyond this server (server/chat/reply_store.h: Redis), found
// by the memory's key as one string (namespace, kind, text or call ids). Thread-safe;
// never throws; load answers nullopt on a miss or a failure.
class ReplyStore {
 public:
  virtual ~ReplyStore() = default;
  virtual std::optional<RememberedReply> load(const std::string& key) = 0;
  virtual void store(const std::string& key, const RememberedReply& r) = 0;
};

// Bounded (by total remembered tokens, least recently used out), thread-safe.
// A reply is found by its text (a plain reply comes back as the assistant message's
// content) or, when it made tool calls, by the ids of its calls (the message comes
// back with tool_calls whose JSON the client re-serialized, so its text differs).
class ConversationMemory {
 public:
  explicit ConversationMemory(int64_t max_tokens = int64_t(16) << 20) : max_tokens_(max_tokens) {}
  void remember(const CacheScope& scope, const std::string& text, RememberedReply r);
  std::optional<RememberedReply> find(const CacheScope& scope, const std::string& text);
  // `call_ids`: the reply's tool call ids, in order.
  void remember_calls(const CacheScope& scope, const std::vector<std::string>& call_ids, RememberedReply r);
  std::optional<RememberedReply> find_calls(const CacheScope& scope, const std::vector<std::string>& call_ids);
  size_t size() const;
  int64_t tokens() const;
  // Writes every reply remembered from now on through to `shared` too, and asks it for
  // a reply this memory does not hold (kept here once found). Set before serving;
  // null: none. Not owned.
  void set_shared(ReplyStore* shared) { shared_ = shared; }
  // Stores every reply this memory holds in the shared store again (it lost them).
  void reshare();

 private:
  using Key = std::tuple<std::string, bool, std::string>;  // scope_key, by call ids, text or ids
  static std::string flat_key(const Key& key);
  void put(Key key, RememberedReply r, bool write_through = true);
  std::optional<RememberedReply> get(const Key& key);
  void evict_locked();
  mutable std::mutex mu_;
  std::map<Key, RememberedReply> replies_;
  int64_t tokens_ = 0;
  int64_t max_tokens_;
  uint64_t clock_ = 0;
  ReplyStore* shared_ = nullptr;
};

// A chat request turned into prompt ids.
struct ChatPrompt {
  std::vector<int32_t> ids;
  int32_t assistant_messages = 0;  // with string content
  int32_t spliced = 0;             // replies whose generated ids were reused
  // Divergence from what the model saw before the latest spliced reply:
  int64_t expected_hit = 0;        // tokens that should hit if nothing diverged/was evicted
  int64_t diverged_at = -1;        // first prompt token differing from it; -1 = none
  std::string reason;              // "" or why history cannot fully hit
  // The rendered text, and the byte offset in it where each id starts (ids.size() + 1
  // entries, the last = text size); empty when the ids do not spell the text byte for
  // byte (then the request has no blocks).
  std::string text;
  std::vector<int64_t> token_offsets;
  std::vector<RequestPart> parts;  // tools and messages, with their blocks' tokens
};

// Renders `messages` with the template and tokenizes with replies spliced in.
// Throws ChatTemplateError (template) or pc::Error.
//
// An assistant message with tool_calls this server generated (found by its call ids)
// is spliced as a whole turn: the template renders its calls as its own JSON (other
// spacing and key order than the model wrote), so the rendered text from the end of
// the previous piece up to the end of the calls (call_region_end(format)) is replaced
// by what the model saw and generated there — the rest of that turn's prompt (the
// messages since the previous splice, as then rendered, and the generation prompt)
// and the reply's ids:
//
//   rendered:  ... ][ tool result ][ <|im_start|>assistant\n<tool_call>{"name": ...}</tool_call> ][<|im_end|>...
//   tokens:    ... ][ context[ids.size():]                  reply ids                   ][ enc(text)
//
// This needs the ids so far to be a prefix of that turn's context and the context to
// spell the rendered text up to the last data byte before the message (nothing the
// client sent since was changed); otherwise the message is tokenized as rendered.
ChatPrompt build_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tok,
                             ConversationMemory& memory, const CacheScope& scope,
                             const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra,
                             ToolFormat tool_format = ToolFormat::kNone, ChatRender mode = {});

// OpenAI clients send tool_calls[].function.arguments as a JSON string; templates
// render `arguments | tojson` or iterate it as an object. Each string that parses as
// a JSON object becomes that object, its keys in the order the string has them (other
// strings are left as they are).
nlohmann::ordered_json parse_tool_arguments(nlohmann::ordered_json messages);

// `value` with each object's keys in the order the same object has them in `order`
// (the request's text read with ordered_json; matched by key and array index), keys
// `order` lacks after them. The server reads bodies into nlohmann::json, which sorts
// keys; templates write mappings (tojson, items) in the order they are given.
nlohmann::ordered_json keep_key_order(const nlohmann::json& value, const nlohmann::ordered_json& order);

// The order keep_key_order needs when the chat messages and template variables
// (`extra`: tools, kwargs) were translated from another API's body (Anthropic's,
// Responses'), read again with ordered_json as `sent`: every object equal to one
// somewhere in `sent` (a tool's schema, a tool_use input) takes that object's key order;
// objects the translation built take the order OpenAI clients send (a message's role,
// content, tool_calls{id, type, function{name, arguments}}, ...; a tool's type,
// function{name, description, parameters}).
nlohmann::ordered_json translated_key_order(const nlohmann::json& messages, const nlohmann::json& extra,
                                            const nlohmann::ordered_json& sent);

// OpenAI clients send a tool-call message's content as null. A template that needs a
// string there (Qwen3: '</think>' in message.content) fails on it; it is rendered again
// with these messages: content "" for each tool-call message whose content is null or
// absent (not up front: DeepSeek-R1 tests `content is not none` and would render an
// empty turn for ""). nullopt when there is no such message.
std::optional<nlohmann::ordered_json> tool_call_content_as_empty(const nlohmann::ordered_json& messages);

// Ids of `text` as a continuation piece (the text after a spliced reply: no BOS,
// no SentencePiece space prefix; special tokens parsed), or as the start of a
// prompt (BOS when the model wants one and the text does not begin with the BOS
// text already; the SentencePiece space prefix as encode() puts it).
std::vector<int32_t> encode_piece(const Tokenizer& tok, const std::string& text, bool first);

}  // namespace pc::server
