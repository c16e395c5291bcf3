#include "server/api/anthropic_request.h"

#include "server/api/api_error.h"
#include "server/chat/chat_request.h"
#include "server/api/lifetime.h"

namespace pc::server {

namespace {

using Translated = AnthropicTranslation;

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

void check_count(const json& items, size_t cap, const std::string& where) {
  if (items.size() > cap)
    throw bad_field(where, "'" + where + "' has " + std::to_string(items.size()) + " items; at most " +
                               std::to_string(cap) + " are allowed",
                    "too_many_items");
}

// A block's "type": 400 naming `where`.type unless it is a string.
std::string block_type(const json& b, const std::string& where) {
  if (!b.is_object()) throw bad_field(where, where + " must be an object with a string 'type'", "invalid_type");
  auto t = b.find("type");
  if (t == b.end() || !t->is_string()) throw bad_field(where + ".type", where + ".type must be a string", "invalid_type");
  return t->get<std::string>();
}

// Records a block's cache_control (if any) as a breakpoint on `kind`/`index`.
void note_cache_control(const json& block, const std::string& where, RequestPart::Kind kind, int index,
                        Translated& t, int sub = -1) {
  auto cc = block.find("cache_control");
  if (cc == block.end() || cc->is_null()) return;
  const std::string w = where + ".cache_control";
  if (!cc->is_object() || block_type(*cc, w) != "ephemeral")
    throw bad_field(w, "'cache_control' must be {\"type\": \"ephemeral\"} (optionally with ttl)");
  auto ttl = cc->find("ttl");
  t.breakpoints.push_back({kind, index, sub, anthropic_ttl_seconds(ttl == cc->end() ? nullptr : &*ttl, w + ".ttl")});
}

std::string text_of_block(const json& b, const std::string& where) {
  auto text = b.find("text");
  if (text == b.end() || !text->is_string())
    throw bad_field(where + ".text", where + " of type text needs a string 'text'");
  return text->get<std::string>();
}

// system: a string or text blocks → one system message (message 0), its blocks as
// content parts (joined by the chat path; each part's span locates a breakpoint).
void translate_system(const json& body, Translated& t) {
  auto it = body.find("system");
  if (it == body.end() || it->is_null()) return;
  if (it->is_string()) {
    t.messages.push_back({{"role", "system"}, {"content", *it}});
    return;
  }
  if (!it->is_array()) throw bad_field("system", "'system' must be a string or an array of text blocks");
  check_count(*it, kMaxContentParts, "system");
  json parts = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& b = (*it)[i];
    const std::string where = at("system", i);
    if (block_type(b, where) != "text") throw bad_field(where + ".type", where + " must be a text block");
    parts.push_back({{"type", "text"}, {"text", text_of_block(b, where)}});
    note_cache_control(b, where, RequestPart::Kind::kMessage, 0, t, int(parts.size()) - 1);
  }
  t.messages.push_back({{"role", "system"}, {"content", parts}});
}

// tool_result content: a string or text blocks.
std::string tool_result_text(const json& b, const std::string& where) {
  auto c = b.find("content");
  if (c == b.end() || c->is_null()) return "";
  if (c->is_string()) return *c;
  if (!c->is_array()) throw bad_field(where + ".content", where + ".content must be a string or an array of text blocks");
  check_count(*c, kMaxContentParts, where + ".content");
  std::string text;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& p = (*c)[i];
    const std::string w = at(where + ".content", i);
    if (block_type(p, w) != "text") throw bad_field(w + ".type", w + " must be a text block");
    text += text_of_block(p, w);
  }
  return text;
}

json tool_call_of(const json& b, const std::string& w) {
  auto id = b.find("id"), name = b.find("name");
  if (id == b.end() || !id->is_string() || name == b.end() || !name->is_string())
    throw bad_field(w + ".id", w + " of type tool_use needs string 'id' and 'name'");
  json input = json::object();
  if (auto in = b.find("input"); in != b.end()) input = *in;
  if (!input.is_object()) throw bad_field(w + ".input", w + ".input must be an object");
  return {{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", std::move(input)}}}};
}

std::string tool_use_id_of(const json& b, const std::string& w, const Translated& t) {
  auto id = b.find("tool_use_id");
  if (id == b.end() || !id->is_string())
    throw bad_field(w + ".tool_use_id", w + " of type tool_result needs a string 'tool_use_id'");
  if (!t.tool_use_ids.count(id->get_ref<const std::string&>()))
    throw bad_field(w + ".tool_use_id", w + ".tool_use_id '" + id->get<std::string>() +
                                            "' matches no tool_use block of an earlier assistant message");
  return id->get<std::string>();
}

// One Anthropic message → one or more OpenAI-style messages: a user message's
// tool_result blocks become "tool" messages (in order, text between them a user
// message); an assistant message's tool_use blocks become its tool_calls.
void translate_message(const json& m, size_t i, Translated& t) {
  const std::string where = at("messages", i);
  auto r = m.is_object() ? m.find("role") : m.end();
  if (!m.is_object() || r == m.end() || !r->is_string())
    throw bad_field(where + ".role", where + " must be an object with a string 'role'");
  const std::string role = *r;
  if (role != "user" && role != "assistant")
    throw bad_field(where + ".role", where + ".role must be \"user\" or \"assistant\"");
  auto c = m.find("content");
  if (c == m.end()) throw bad_field(where + ".content", where + ".content is required");
  const json& content = *c;
  if (content.is_string()) {
    t.messages.push_back({{"role", role}, {"content", content}});
    return;
  }
  if (!content.is_array()) throw bad_field(where + ".content", where + ".content must be a string or an array of blocks");
  check_count(content, kMaxContentParts, where + ".content");
  json current = {{"role", role}, {"content", json::array()}};
  bool has_current = false;
  std::vector<std::string> new_ids;  // tool_use ids of this message: answerable from the next one
  auto flush = [&] {
    if (has_current) t.messages.push_back(current);
    current = {{"role", role}, {"content", json::array()}};
    has_current = false;
  };
  for (size_t j = 0; j < content.size(); ++j) {
    const json& b = content[j];
    const std::string w = at(where + ".content", j);
    const std::string type = block_type(b, w);
    if (type == "text") {
      current["content"].push_back({{"type", "text"}, {"text", text_of_block(b, w)}});
      has_current = true;
      note_cache_control(b, w, RequestPart::Kind::kMessage, int(t.messages.size()), t,
                         int(current["content"].size()) - 1);
      continue;
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      // Earlier thinking: the message's reasoning_content, which the template renders
      // as it renders reasoning (Qwen3) or drops (DeepSeek-R1, templates without it).
      // Redacted thinking has no text to render.
      if (type == "thinking") {
        auto th = b.find("thinking");
        if (th == b.end() || !th->is_string())
          throw bad_field(w + ".thinking", w + " of type thinking needs a string 'thinking'");
        std::string r = current.value("reasoning_content", std::string());
        current["reasoning_content"] = r + th->get<std::string>();
      }
      has_current = true;
      continue;
    } else if (type == "tool_use" && role == "assistant") {
      current["tool_calls"].push_back(tool_call_of(b, w));
      new_ids.push_back(current["tool_calls"].back()["id"]);
      has_current = true;
    } else if (type == "tool_result" && role == "user") {
      const std::string id = tool_use_id_of(b, w, t);
      flush();
      t.messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", tool_result_text(b, w)}});
      note_cache_control(b, w, RequestPart::Kind::kMessage, int(t.messages.size()) - 1, t);
      continue;
    } else {
      throw bad_field(w + ".type", "block type '" + type + "' is not supported in " + role + " messages");
    }
    // The block lies in the message being built (pushed at the next flush).
    note_cache_control(b, w, RequestPart::Kind::kMessage, int(t.messages.size()), t);
  }
  flush();
  t.tool_use_ids.insert(new_ids.begin(), new_ids.end());
}

void translate_tools(const json& body, Translated& t) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_array()) throw bad_field("tools", "'tools' must be an array");
  check_count(*it, kMaxTools, "tools");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& tool = (*it)[i];
    const std::string where = at("tools", i);
    auto name = tool.is_object() ? tool.find("name") : tool.end();
    if (!tool.is_object() || name == tool.end() || !name->is_string())
      throw bad_field(where + ".name", where + " needs a string 'name'");
    auto schema = tool.find("input_schema");
    if (schema == tool.end() || !schema->is_object())
      throw bad_field(where + ".input_schema", where + ".input_schema must be an object (a JSON schema)");
    json fn = {{"name", *name}, {"parameters", *schema}};
    if (auto d = tool.find("description"); d != tool.end() && !d->is_null()) {
      if (!d->is_string()) throw bad_field(where + ".description", where + ".description must be a string", "invalid_type");
      fn["description"] = *d;
    }
    if (auto s = tool.find("strict"); s != tool.end() && !s->is_null() && !s->is_boolean())
      throw bad_field(where + ".strict", where + ".strict must be a boolean", "invalid_type");
    t.tools.push_back({{"type", "function"}, {"function", fn}});
    note_cache_control(tool, where, RequestPart::Kind::kTool, int(i), t);
  }
}

// Anthropic's tool_choice in OpenAI's words (parse_tool_choice checks it against the
// tools and the template): auto → "auto", none → "none", any → "required", {type: tool,
// name} → {type: function, function: {name}}. disable_parallel_tool_use is accepted
// (docs/api.md).
json openai_tool_choice(const json& c) {
  const std::string w = "tool_choice";
  const std::string type = block_type(c, w);
  if (auto d = c.find("disable_parallel_tool_use"); d != c.end() && !d->is_null() && !d->is_boolean())
    throw bad_field(w + ".disable_parallel_tool_use", "'tool_choice.disable_parallel_tool_use' must be a boolean",
                    "invalid_type");
  if (type == "auto" || type == "none") return type;
  if (type == "any") return "required";
  if (type == "tool") {
    auto name = c.find("name");
    if (name == c.end() || !name->is_string())
      throw bad_field(w + ".name", "'tool_choice.name' (a string) is required with type 'tool'");
    return {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  throw bad_field(w + ".type", "'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\", got \"" +
                                   type + "\"");
}

}  // namespace

AnthropicTranslation translate_anthropic(const json& body) {
  Translated t;
  translate_tools(body, t);
  translate_system(body, t);
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    throw bad_field("messages", "'messages' is required", "missing_required_parameter");
  if (!it->is_array() || it->empty()) throw bad_field("messages", "'messages' must be a non-empty array");
  check_count(*it, kMaxMessages, "messages");
  for (size_t i = 0; i < it->size(); ++i) translate_message((*it)[i], i, t);
  return t;
}

std::optional<bool> anthropic_thinking(const json& body) {
  const auto t = body.find("thinking");
  if (t == body.end() || t->is_null()) return std::nullopt;
  const std::string type = block_type(*t, "thinking");
  if (type == "disabled") return false;
  if (type != "enabled" && type != "adaptive")
    throw bad_field("thinking.type", "'thinking.type' must be \"enabled\", \"adaptive\" or \"disabled\", got \"" +
                                         type + "\"");
  if (auto b = t->find("budget_tokens"); b != t->end() && !b->is_null() && !b->is_number_integer())
    throw bad_field("thinking.budget_tokens", "'thinking.budget_tokens' must be an integer", "invalid_type");
  return true;
}

bool anthropic_tools_off(const json& body) {
  auto c = body.find("tool_choice");
  if (c == body.end() || !c->is_object()) return false;
  auto type = c->find("type");
  return type != c->end() && *type == "none";
}

json anthropic_common_body(const json& body) {
  auto mt = body.find("max_tokens");
  if (mt == body.end() || mt->is_null())
    throw bad_field("max_tokens", "'max_tokens' is required", "missing_required_parameter");
  const bool positive = mt->is_number_unsigned() ? mt->get<uint64_t>() >= 1
                                                 : mt->is_number_integer() && mt->get<int64_t>() >= 1;
  if (!positive)
    throw bad_field("max_tokens", "'max_tokens' must be a positive integer");
  json o = {{"max_tokens", *mt}};
  for (const char* k : {"model", "temperature", "top_p", "top_k", "stream", "cache_salt"})
    if (auto v = body.find(k); v != body.end() && !v->is_null()) o[k] = *v;
  if (auto t = body.find("temperature"); t != body.end() && t->is_number() && (t->get<double>() < 0 || t->get<double>() > 1))
    throw bad_field("temperature", "'temperature' must be between 0 and 1");
  if (auto s = body.find("stop_sequences"); s != body.end() && !s->is_null()) {
    if (!s->is_array()) throw bad_field("stop_sequences", "'stop_sequences' must be an array of strings");
    for (const json& x : *s)
      if (!x.is_string() || x.get_ref<const std::string&>().empty())
        throw bad_field("stop_sequences", "'stop_sequences' must be an array of non-empty strings");
    o["stop"] = *s;
  }
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) o["tool_choice"] = openai_tool_choice(*c);
  return o;
}

}  // namespace pc::server
