#include "server/chat/chat_request.h"

#include <string>

#include "server/api/api_error.h"

namespace pc::server {

namespace {

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

// A JSON value's type for messages ("a number", "null").
std::string type_name(const json& v) {
  const std::string t = v.type_name();
  return (t == "array" || t == "object" ? "an " : t == "null" ? "" : "a ") + t;
}

void check_count(const json& items, size_t cap, const std::string& where) {
  if (items.size() > cap)
    throw bad_field(where, "'" + where + "' has " + std::to_string(items.size()) + " items; at most " +
                               std::to_string(cap) + " are allowed",
                    "too_many_items");
}

// A string member `key` of object `o`, when present and not null.
void check_string_member(const json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it != o.end() && !it->is_null() && !it->is_string())
    throw bad_field(where + "." + key, where + "." + key + " must be a string, got " + type_name(*it), "invalid_type");
}

void check_content_part(const json& part, const std::string& w) {
  if (!part.is_object()) throw bad_field(w, w + " must be an object {\"type\": \"text\", \"text\": ...}", "invalid_type");
  auto type = part.find("type");
  if (type == part.end() || !type->is_string())
    throw bad_field(w + ".type", w + ".type must be a string", "invalid_type");
  if (*type != "text")
    throw bad_field(w + ".type", w + ".type '" + type->get<std::string>() + "' is not supported (text parts only)");
  auto text = part.find("text");
  if (text == part.end() || !text->is_string())
    throw bad_field(w + ".text", w + ".text must be a string", "invalid_type");
}

void check_tool_calls(const json& m, const std::string& where) {
  auto calls = m.find("tool_calls");
  if (calls == m.end() || calls->is_null()) return;
  if (!calls->is_array()) throw bad_field(where + ".tool_calls", where + ".tool_calls must be an array");
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& c = (*calls)[k];
    const std::string w = at(where + ".tool_calls", k);
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      throw bad_field(w + ".function.name", w + " must be an object with function.name a string");
    check_string_member(c, "id", w);
    if (auto a = c["function"].find("arguments");
        a != c["function"].end() && !a->is_null() && !a->is_string() && !a->is_object())
      throw bad_field(w + ".function.arguments", w + ".function.arguments must be a JSON string or an object");
  }
}

void check_message(const json& m, const std::string& where) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
    throw bad_field(where + ".role", where + " must be an object with a string 'role'");
  const std::string& role = m["role"].get_ref<const std::string&>();
  if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer" &&
      role != "function")
    throw bad_field(where + ".role", "unknown role '" + role + "'");
  if (auto c = m.find("content"); c != m.end() && !c->is_null()) {
    if (c->is_array()) {
      check_count(*c, kMaxContentParts, where + ".content");
      for (size_t j = 0; j < c->size(); ++j) check_content_part((*c)[j], at(where + ".content", j));
    } else if (!c->is_string()) {
      throw bad_field(where + ".content", where + ".content must be a string or an array of parts");
    }
  }
  for (const char* key : {"name", "tool_call_id", "reasoning_content"}) check_string_member(m, key, where);
  check_tool_calls(m, where);
}

// Bytes of a message's content text (a string, or its text parts).
int64_t content_bytes(const json& m) {
  auto c = m.find("content");
  if (c == m.end()) return 0;
  if (c->is_string()) return int64_t(c->get_ref<const std::string&>().size());
  int64_t n = 0;
  if (c->is_array())
    for (const json& part : *c)
      if (auto t = part.is_object() ? part.find("text") : part.end(); t != part.end() && t->is_string())
        n += int64_t(t->get_ref<const std::string&>().size());
  return n;
}

}  // namespace

void check_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null())
    throw bad_field("messages", "'messages' is required", "missing_required_parameter");
  if (!it->is_array() || it->empty()) throw bad_field("messages", "'messages' must be a non-empty array");
  check_count(*it, kMaxMessages, "messages");
  for (size_t i = 0; i < it->size(); ++i) check_message((*it)[i], at("messages", i));
}

void check_tools(const json& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_array()) throw bad_field("tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}}", "invalid_type");
  check_count(*it, kMaxTools, "tools");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string w = at("tools", i);
    if (!t.is_object()) throw bad_field(w, w + " must be an object {\"type\": \"function\", \"function\": {...}}", "invalid_type");
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || *type != "function")
      throw bad_field(w + ".type", w + ".type must be \"function\"");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object())
      throw bad_field(w + ".function", w + ".function must be an object with a string 'name'",
                      fn == t.end() ? "missing_required_parameter" : "invalid_type");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      throw bad_field(w + ".function.name", w + ".function.name must be a non-empty string");
    check_string_member(*fn, "description", w + ".function");
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object())
      throw bad_field(w + ".function.parameters", w + ".function.parameters must be an object (a JSON schema)",
                      "invalid_type");
  }
}

json template_messages(json messages) {
  for (json& m : messages) {
    if (auto r = m.find("role"); r != m.end() && *r == "developer") *r = "system";
    auto c = m.find("content");
    if (c == m.end() || !c->is_array()) continue;
    std::string text;
    for (size_t j = 0; j < c->size(); ++j) {
      if (j > 0) text += kContentPartJoiner;
      text += (*c)[j]["text"].get_ref<const std::string&>();
    }
    *c = std::move(text);
  }
  return messages;
}

json chat_extra(const json& body) {
  json extra = json::object();
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      throw bad_field("chat_template_kwargs", "'chat_template_kwargs' must be an object", "invalid_type");
    extra = *it;
  }
  // tool_choice "none": the model is not told about the tools.
  const auto choice = body.find("tool_choice");
  const bool no_tools = choice != body.end() && *choice == "none";
  for (const char* k : {"tools", "documents"})
    if (auto it = body.find(k); it != body.end() && !it->is_null()) extra[k] = *it;
  if (no_tools) extra.erase("tools");
  return extra;
}

void check_prompt_bytes(const json& messages, int64_t max_prompt_bytes, int64_t n_ctx, const char* param) {
  if (!messages.is_array() || max_prompt_bytes <= 0) return;
  int64_t bytes = 0;
  for (const json& m : messages) {
    if (!m.is_object()) continue;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || *role == "assistant" || *role == "function") continue;
    bytes += content_bytes(m);
  }
  if (bytes > max_prompt_bytes)
    throw ApiError(400, "invalid_request_error",
                   "This model's maximum context length is " + std::to_string(n_ctx) + " tokens; the " +
                       std::to_string(bytes) + " bytes of the messages' text are more tokens than that",
                   param, "context_length_exceeded");
}

}  // namespace pc::server
