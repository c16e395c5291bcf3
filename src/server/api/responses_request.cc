#include "server/api/responses_request.h"

#include "server/api/api_error.h"
#include "server/chat/chat_request.h"

namespace pc::server {

namespace {

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

const std::string& string_member(const json& o, const char* key, const std::string& where, bool required = true) {
  static const std::string kEmpty;
  const json* v = field(o, key);
  if (!v) {
    if (required)
      throw bad_field(where + "." + key, where + "." + key + " is required", "missing_required_parameter");
    return kEmpty;
  }
  if (!v->is_string()) throw bad_field(where + "." + key, where + "." + key + " must be a string", "invalid_type");
  return v->get_ref<const std::string&>();
}

ApiError unsupported(const std::string& name, const std::string& why) {
  return bad_field(name, "'" + name + "' " + why, "unsupported_parameter");
}

void check_count(const json& items, size_t cap, const std::string& where) {
  if (items.size() > cap)
    throw bad_field(where, "'" + where + "' has " + std::to_string(items.size()) + " items; at most " +
                               std::to_string(cap) + " are allowed",
                    "too_many_items");
}

// A message item's content as chat content: a string, or its text parts
// ([{"type": "text", "text": ...}]). Images, files and audio would change the answer
// the model gives, and it reads text only: a 400 naming the part.
json message_content(const json& content, const std::string& where, const std::string& role) {
  if (content.is_string()) return content;
  if (!content.is_array())
    throw bad_field(where, where + " must be a string or an array of content parts", "invalid_type");
  check_count(content, kMaxContentParts, where);
  json parts = json::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const json& p = content[j];
    const std::string w = at(where, j);
    if (!p.is_object()) throw bad_field(w, w + " must be an object with a string 'type'", "invalid_type");
    const std::string& type = string_member(p, "type", w);
    std::string text;
    if (type == "input_text" || type == "output_text" || type == "text") {
      text = string_member(p, "text", w);
    } else if (type == "refusal") {
      text = string_member(p, "refusal", w);
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw bad_field(w + ".type", w + ".type '" + type + "' is not supported (the model reads text only)",
                      "unsupported_parameter");
    } else {
      throw bad_field(w + ".type", w + ".type '" + type + "' is not a content part type (input_text, output_text, refusal)");
    }
    parts.push_back({{"type", "text"}, {"text", std::move(text)}});
  }
  // An assistant turn the server generated comes back as its text: one string, the
  // key the conversation memory finds its generated ids by.
  if (role == "assistant" && parts.size() == 1) return parts[0]["text"];
  if (parts.empty()) return "";
  return parts;
}

// function_call_output's output: a string, or content parts whose text is joined.
std::string call_output(const json& item, const std::string& where) {
  const json* out = field(item, "output");
  if (!out) throw bad_field(where + ".output", where + ".output is required", "missing_required_parameter");
  if (out->is_string()) return out->get<std::string>();
  if (!out->is_array()) throw bad_field(where + ".output", where + ".output must be a string or an array", "invalid_type");
  std::string text;
  for (size_t j = 0; j < out->size(); ++j) {
    const json& p = (*out)[j];
    const std::string w = at(where + ".output", j);
    if (!p.is_object()) throw bad_field(w, w + " must be an object", "invalid_type");
    const std::string& type = string_member(p, "type", w);
    if (type != "input_text" && type != "output_text")
      throw bad_field(w + ".type", w + ".type '" + type + "' is not supported (text only)", "unsupported_parameter");
    if (!text.empty()) text += kContentPartJoiner;
    text += string_member(p, "text", w);
  }
  return text;
}

void add_item(const json& item, const std::string& w, ResponsesTranslation& t, const ItemLookup& lookup,
              bool referenced);

// The last message when it is an assistant turn that has only reasoning so far.
json* reasoning_only(json& messages) {
  if (messages.empty()) return nullptr;
  json& m = messages.back();
  const bool only = m["role"] == "assistant" && m["content"].is_null() && !m.contains("tool_calls") &&
                    m.contains("reasoning_content");
  return only ? &m : nullptr;
}

// The input items, appended to t.messages.
void translate_input(const json& input, ResponsesTranslation& t, const ItemLookup& lookup) {
  if (input.is_string()) {
    t.messages.push_back({{"role", "user"}, {"content", input}});
    t.input_items.push_back({{"type", "message"}, {"role", "user"},
                             {"content", json::array({{{"type", "input_text"}, {"text", input}}})}});
    return;
  }
  if (!input.is_array()) throw bad_field("input", "'input' must be a string or an array of items", "invalid_type");
  check_count(input, kMaxMessages, "input");
  for (size_t i = 0; i < input.size(); ++i) {
    add_item(input[i], at("input", i), t, lookup, false);
    t.input_items.push_back(input[i]);
  }
  // Reasoning that began no message or call is no turn of its own.
  json kept = json::array();
  for (json& m : t.messages) {
    const bool lone = m["role"] == "assistant" && m["content"].is_null() && !m.contains("tool_calls");
    if (!lone) kept.push_back(std::move(m));
  }
  t.messages = std::move(kept);
}

// One input item (`referenced`: found by an item_reference, which it may not be itself).
void add_item(const json& item, const std::string& w, ResponsesTranslation& t, const ItemLookup& lookup,
              bool referenced) {
  if (!item.is_object()) throw bad_field(w, w + " must be an object", "invalid_type");
  // An "easy" input message has a role and content and no type.
  const std::string type = field(item, "type") ? string_member(item, "type", w) : std::string("message");
  if (type == "message") {
    const std::string& role = string_member(item, "role", w);
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      throw bad_field(w + ".role", w + ".role must be user, assistant, system or developer, got '" + role + "'");
    const json* content = field(item, "content");
    if (!content) throw bad_field(w + ".content", w + ".content is required", "missing_required_parameter");
    json text = message_content(*content, w + ".content", role);
    if (json* last = reasoning_only(t.messages); last && role == "assistant")
      (*last)["content"] = std::move(text);  // the turn its reasoning item began
    else
      t.messages.push_back({{"role", role}, {"content", std::move(text)}});
  } else if (type == "function_call") {
    const std::string& call_id = string_member(item, "call_id", w);
    const std::string& name = string_member(item, "name", w);
    const std::string& args = string_member(item, "arguments", w);
    if (call_id.empty()) throw bad_field(w + ".call_id", w + ".call_id must not be empty");
    if (name.empty()) throw bad_field(w + ".name", w + ".name must not be empty");
    json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
    // The calls of one turn follow its text: they join the assistant message before.
    json* last = t.messages.empty() ? nullptr : &t.messages.back();
    if (last && (*last)["role"] == "assistant") {
      if (!last->contains("tool_calls")) (*last)["tool_calls"] = json::array();
      if ((*last)["content"].is_string() && (*last)["content"].get_ref<const std::string&>().empty())
        (*last)["content"] = nullptr;
      (*last)["tool_calls"].push_back(std::move(call));
    } else {
      t.messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    }
  } else if (type == "function_call_output") {
    const std::string& call_id = string_member(item, "call_id", w);
    t.messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", call_output(item, w)}});
  } else if (type == "reasoning") {
    // Earlier reasoning the client sends back begins an assistant turn: it becomes the
    // reasoning_content of the message or calls that follow (the template renders it as
    // it renders reasoning, or drops it). Only its content is the model's text; a
    // summary or encrypted content adds nothing.
    std::string text;
    if (const json* c = field(item, "content")) {
      if (!c->is_array()) throw bad_field(w + ".content", w + ".content must be an array", "invalid_type");
      for (size_t i = 0; i < c->size(); ++i) {
        const std::string wp = at(w + ".content", i);
        if (!(*c)[i].is_object()) throw bad_field(wp, wp + " must be an object", "invalid_type");
        if (string_member((*c)[i], "type", wp) == "reasoning_text") text += string_member((*c)[i], "text", wp);
      }
    }
    if (!text.empty()) t.messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", text}});
  } else if (type == "item_reference" && !referenced) {
    // A client that stores responses sends their output items back by id.
    const std::string& id = string_member(item, "id", w);
    const std::optional<json> found = lookup ? lookup(id) : std::nullopt;
    if (!found)
      throw bad_field(w + ".id", "item '" + id + "' is not an output item of a stored response", "item_not_found");
    add_item(*found, w, t, lookup, true);
  } else {
    throw bad_field(w + ".type", w + ".type '" + type + "' is not supported (message, function_call, "
                                 "function_call_output, reasoning, item_reference)", "unsupported_parameter");
  }
}

// Function tools in chat's shape; other types are listed as ignored.
void translate_tools(const json& body, ResponsesTranslation& t) {
  const json* tools = field(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) throw bad_field("tools", "'tools' must be an array", "invalid_type");
  check_count(*tools, kMaxTools, "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& tool = (*tools)[i];
    const std::string w = at("tools", i);
    if (!tool.is_object()) throw bad_field(w, w + " must be an object", "invalid_type");
    const std::string& type = string_member(tool, "type", w);
    if (type != "function") {
      // A hosted tool (web_search, file_search, mcp, computer_use_preview, ...): harnesses
      // send them whether or not the server runs them; the model never sees them.
      t.ignored_tools.push_back(type);
      continue;
    }
    const std::string& name = string_member(tool, "name", w);
    if (name.empty()) throw bad_field(w + ".name", w + ".name must not be empty");
    json fn = {{"name", name}};
    if (const json* d = field(tool, "description")) {
      if (!d->is_string()) throw bad_field(w + ".description", w + ".description must be a string", "invalid_type");
      fn["description"] = *d;
    }
    if (const json* p = field(tool, "parameters")) {
      if (!p->is_object()) throw bad_field(w + ".parameters", w + ".parameters must be an object (a JSON schema)", "invalid_type");
      fn["parameters"] = *p;
    }
    if (const json* s = field(tool, "strict"); s && !s->is_boolean())
      throw bad_field(w + ".strict", w + ".strict must be a boolean", "invalid_type");
    t.tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
}

// tool_choice in chat's shape: "auto" / "none" / "required" as they are, {"type":
// "function", "name"} as {"type": "function", "function": {"name"}}.
json translate_tool_choice(const json& body) {
  const json* tc = field(body, "tool_choice");
  if (!tc) return nullptr;
  if (tc->is_string()) {
    if (*tc == "auto" || *tc == "none" || *tc == "required") return *tc;
    throw bad_field("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
  }
  if (!tc->is_object()) throw bad_field("tool_choice", "'tool_choice' must be a string or an object", "invalid_type");
  const std::string& type = string_member(*tc, "type", "tool_choice");
  if (type == "function") {
    const std::string& name = string_member(*tc, "name", "tool_choice");
    return {{"type", "function"}, {"function", {{"name", name}}}};
  }
  throw unsupported("tool_choice", "of type '" + type + "' cannot be enforced (function tools only)");
}

// Fields whose effect the server cannot give: a 400 naming the field.
void reject_unsupported(const json& body) {
  if (const json* b = field(body, "background"); b && !(b->is_boolean() && !b->get<bool>()))
    throw unsupported("background", "is not supported (responses run in the foreground)");
  if (field(body, "conversation")) throw unsupported("conversation", "is not supported; use previous_response_id");
  if (field(body, "prompt")) throw unsupported("prompt", "(a stored prompt template) is not supported; send input");
  if (const json* n = field(body, "top_logprobs"); n && !(n->is_number_integer() && n->get<int64_t>() == 0))
    throw unsupported("top_logprobs", "is not supported on /v1/responses");
  if (const json* inc = field(body, "include")) {
    if (!inc->is_array()) throw bad_field("include", "'include' must be an array of strings", "invalid_type");
    for (size_t i = 0; i < inc->size(); ++i) {
      if (!(*inc)[i].is_string()) throw bad_field(at("include", i), at("include", i) + " must be a string", "invalid_type");
      if ((*inc)[i] == "message.output_text.logprobs")
        throw unsupported(at("include", i), "= message.output_text.logprobs is not supported on /v1/responses");
    }
  }
  // text.format (structured output) is read by parse_responses_text_format.
  if (const json* r = field(body, "reasoning")) {
    if (!r->is_object()) throw bad_field("reasoning", "'reasoning' must be an object", "invalid_type");
    string_member(*r, "effort", "reasoning", false);
  }
  if (const json* p = field(body, "parallel_tool_calls"); p && !p->is_boolean())
    throw bad_field("parallel_tool_calls", "'parallel_tool_calls' must be a boolean", "invalid_type");
  if (const json* tr = field(body, "truncation"); tr && !(tr->is_string() && (*tr == "auto" || *tr == "disabled")))
    throw bad_field("truncation", "'truncation' must be \"auto\" or \"disabled\"");
  if (const json* m = field(body, "metadata"); m && !m->is_object())
    throw bad_field("metadata", "'metadata' must be an object", "invalid_type");
}

}  // namespace

bool valid_response_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

ResponsesTranslation translate_responses(const json& body, const ItemLookup& lookup) {
  ResponsesTranslation t;
  reject_unsupported(body);
  if (const json* ins = field(body, "instructions")) {
    if (!ins->is_string()) throw bad_field("instructions", "'instructions' must be a string", "invalid_type");
    t.instructions = ins->get<std::string>();
  }
  const json* input = field(body, "input");
  if (!input) throw bad_field("input", "'input' is required", "missing_required_parameter");
  translate_input(*input, t, lookup);
  translate_tools(body, t);
  if (const json* s = field(body, "store")) {
    if (!s->is_boolean()) throw bad_field("store", "'store' must be a boolean", "invalid_type");
    t.store = s->get<bool>();
  }
  if (const json* p = field(body, "previous_response_id")) {
    if (!p->is_string() || !valid_response_id(p->get<std::string>()))
      throw bad_field("previous_response_id", "'previous_response_id' must be a response id (resp_...)");
    t.previous_response_id = p->get<std::string>();
  }
  if (t.messages.empty() && t.previous_response_id.empty())
    throw bad_field("input", "'input' has no message to answer");

  json& c = t.chat_body;
  if (const json* m = field(body, "max_output_tokens")) {
    const bool positive = m->is_number_unsigned() ? m->get<uint64_t>() >= 1 : m->is_number_integer() && m->get<int64_t>() >= 1;
    if (!positive) throw bad_field("max_output_tokens", "'max_output_tokens' must be a positive integer");
    c["max_tokens"] = *m;
  }
  // Shared with chat (parse_common checks them) and promptcache's own extensions.
  for (const char* k : {"model", "temperature", "top_p", "stream", "top_k", "min_p", "seed", "stop", "cache_salt",
                        "repetition_penalty", "repeat_penalty", "repeat_last_n", "cache_reuse", "cache_reuse_policy",
                        "cache_reuse_budget", "cache_reuse_blocks", "test_forced_reply", "prompt_cache_retention"})
    if (const json* v = field(body, k)) c[k] = *v;
  if (!t.tools.empty()) c["tools"] = t.tools;
  if (json tc = translate_tool_choice(body); !tc.is_null()) c["tool_choice"] = std::move(tc);

  json& e = t.echo;
  e["instructions"] = t.instructions.empty() ? json(nullptr) : json(t.instructions);
  e["tools"] = field(body, "tools") ? body["tools"] : json::array();
  e["tool_choice"] = field(body, "tool_choice") ? body["tool_choice"] : json("auto");
  e["temperature"] = field(body, "temperature") ? body["temperature"] : json(1.0);
  e["top_p"] = field(body, "top_p") ? body["top_p"] : json(1.0);
  e["max_output_tokens"] = field(body, "max_output_tokens") ? body["max_output_tokens"] : json(nullptr);
  e["text"] = field(body, "text") ? body["text"] : json{{"format", {{"type", "text"}}}};
  e["reasoning"] = field(body, "reasoning") ? body["reasoning"] : json{{"effort", nullptr}, {"summary", nullptr}};
  e["metadata"] = field(body, "metadata") ? body["metadata"] : json::object();
  e["parallel_tool_calls"] = field(body, "parallel_tool_calls") ? body["parallel_tool_calls"] : json(true);
  e["truncation"] = field(body, "truncation") ? body["truncation"] : json("disabled");
  e["previous_response_id"] = t.previous_response_id.empty() ? json(nullptr) : json(t.previous_response_id);
  e["store"] = t.store;
  e["user"] = field(body, "user") ? body["user"] : json(nullptr);
  return t;
}

}  // namespace pc::server
