#include "server/chat/tool_calls.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "server/chat/harmony.h"
#include "server/chat/tool_call_scan.h"

namespace pc::server {

namespace {

using ojson = nlohmann::ordered_json;  // keeps the model's key order in arguments

constexpr std::string_view kQwenOpen = "<tool_call>";
constexpr std::string_view kQwenClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr int kMaxJsonDepth = 256;  // deeper arguments are no call (bounded parsing)

using scan::Got;
using scan::expect;
using scan::is_ws;
using scan::opener_prefix_at_end;
using scan::skip_ws;

// The JSON object, array or string at s[i..] (after whitespace): [*begin, i) once it
// is complete. Brackets are matched outside strings; json parsing validates it after.
Got scan_json(std::string_view s, size_t& i, size_t* begin) {
  skip_ws(s, i);
  if (i >= s.size()) return Got::kMore;
  *begin = i;
  const char c = s[i];
  if (c != '{' && c != '[' && c != '"') return Got::kNo;
  int depth = 0;
  bool in_str = false, esc = false;
  for (size_t j = i; j < s.size(); ++j) {
    const char ch = s[j];
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (ch == '\\') {
        esc = true;
      } else if (ch == '"') {
        in_str = false;
        if (depth == 0) {
          i = j + 1;
          return Got::kDone;
        }
      }
      continue;
    }
    if (ch == '"') {
      in_str = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > kMaxJsonDepth) return Got::kNo;
    } else if (ch == '}' || ch == ']') {
      if (--depth == 0) {
        i = j + 1;
        return Got::kDone;
      }
    }
  }
  return Got::kMore;
}

ojson parse_json(std::string_view s) { return ojson::parse(s.begin(), s.end(), nullptr, false); }

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// A call from {"name": ..., <args_key>: {...}}: arguments are an object, or a string
// holding one; absent arguments are {}. False when it is no call.
bool call_from_object(const ojson& o, std::initializer_list<const char*> args_keys, ToolCall& call) {
  if (!o.is_object()) return false;
  auto name = o.find("name");
  if (name == o.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  call.name = name->get<std::string>();
  call.arguments = "{}";
  for (const char* key : args_keys) {
    auto a = o.find(key);
    if (a == o.end()) continue;
    if (a->is_object()) {
      call.arguments = dump(*a);
    } else if (a->is_string()) {
      const ojson inner = parse_json(a->get_ref<const std::string&>());
      if (!inner.is_object()) return false;
      call.arguments = dump(inner);
    } else {
      return false;
    }
    break;
  }
  return true;
}

// A JSON value at s[i..] parsed, i past it.
Got json_at(std::string_view s, size_t& i, ojson& out) {
  size_t begin = 0;
  const Got g = scan_json(s, i, &begin);
  if (g != Got::kDone) return g;
  out = parse_json(s.substr(begin, i - begin));
  return out.is_discarded() ? Got::kNo : Got::kDone;
}

// <tool_call> {"name": ..., "arguments": ...} </tool_call>
Got parse_qwen(std::string_view s, size_t& i, std::vector<ToolCall>& calls) {
  if (Got g = expect(s, i, kQwenOpen); g != Got::kDone) return g;
  ojson o;
  if (Got g = json_at(s, i, o); g != Got::kDone) return g;
  ToolCall c;
  if (!call_from_object(o, {"arguments", "parameters"}, c)) return Got::kNo;
  skip_ws(s, i);
  if (Got g = expect(s, i, kQwenClose); g != Got::kDone) return g;
  calls.push_back(std::move(c));
  return Got::kDone;
}

// [<|python_tag|>] {"name": ..., "parameters": ...}
Got parse_llama(std::string_view s, size_t& i, std::vector<ToolCall>& calls) {
  if (expect(s, i, kPythonTag, true) != Got::kNo) {
    if (Got g = expect(s, i, kPythonTag); g != Got::kDone) return g;
    skip_ws(s, i);
    if (i < s.size() && s[i] != '{') return Got::kNo;
  }
  ojson o;
  if (Got g = json_at(s, i, o); g != Got::kDone) return g;
  ToolCall c;
  if (!call_from_object(o, {"parameters", "arguments"}, c)) return Got::kNo;
  calls.push_back(std::move(c));
  return Got::kDone;
}

// [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
Got parse_mistral(std::string_view s, size_t& i, std::vector<ToolCall>& calls) {
  if (Got g = expect(s, i, kMistralOpen); g != Got::kDone) return g;
  skip_ws(s, i);
  if (i < s.size() && s[i] != '[') return Got::kNo;
  ojson a;
  if (Got g = json_at(s, i, a); g != Got::kDone) return g;
  if (!a.is_array() || a.empty()) return Got::kNo;
  std::vector<ToolCall> got;
  for (const ojson& o : a) {
    ToolCall c;
    if (!call_from_object(o, {"arguments", "parameters"}, c)) return Got::kNo;
    got.push_back(std::move(c));
  }
  for (ToolCall& c : got) calls.push_back(std::move(c));
  return Got::kDone;
}

// Text up to `stop` (not included; i moves onto it), without newlines or markers.
Got until(std::string_view s, size_t& i, std::string_view stop, std::string* out) {
  const size_t at = s.find(stop, i);
  size_t scan_end = at;
  if (at == std::string_view::npos) scan_end = s.size() - opener_prefix_at_end(s, i, stop);  // maybe the stop's start
  const std::string_view piece = s.substr(i, scan_end - i);
  if (piece.find('\n') != std::string_view::npos || piece.find("<｜") != std::string_view::npos) return Got::kNo;
  if (at == std::string_view::npos) return piece.size() > 256 ? Got::kNo : Got::kMore;
  *out = std::string(piece);
  i = at;
  return out->empty() ? Got::kNo : Got::kDone;
}

// <｜tool▁calls▁begin｜> (<｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>)+ <｜tool▁calls▁end｜>
Got parse_deepseek(std::string_view s, size_t& i, std::vector<ToolCall>& calls) {
  if (Got g = expect(s, i, kDsCallsBegin); g != Got::kDone) return g;
  std::vector<ToolCall> got;
  for (;;) {
    skip_ws(s, i);
    if (Got g = expect(s, i, kDsCallBegin); g != Got::kDone) return g;
    std::string type, name;
    if (Got g = until(s, i, kDsSep, &type); g != Got::kDone) return g;
    if (Got g = expect(s, i, kDsSep); g != Got::kDone) return g;
    if (Got g = until(s, i, "\n", &name); g != Got::kDone) return g;
    skip_ws(s, i);
    if (Got g = expect(s, i, "```json"); g != Got::kDone) return g;
    ojson args;
    if (Got g = json_at(s, i, args); g != Got::kDone) return g;
    ToolCall c;
    if (!call_from_object(ojson{{"name", name}, {"arguments", args}}, {"arguments"}, c)) return Got::kNo;
    got.push_back(std::move(c));
    skip_ws(s, i);
    if (Got g = expect(s, i, "```"); g != Got::kDone) return g;
    skip_ws(s, i);
    if (Got g = expect(s, i, kDsCallEnd); g != Got::kDone) return g;
    skip_ws(s, i);
    const Got end = expect(s, i, kDsCallsEnd, true);
    if (end == Got::kDone) {
      i += kDsCallsEnd.size();
      break;
    }
    const Got more = expect(s, i, kDsCallBegin, true);
    if (end == Got::kMore || more == Got::kMore || i == s.size()) return Got::kMore;
    if (more == Got::kNo) return Got::kNo;
  }
  for (ToolCall& c : got) calls.push_back(std::move(c));
  return Got::kDone;
}

Got parse_call(ToolFormat f, std::string_view s, size_t& i, const ToolSchemas* schemas,
               std::vector<ToolCall>& calls) {
  switch (f) {
    case ToolFormat::kQwen: return parse_qwen(s, i, calls);
    case ToolFormat::kQwenXml: return scan::parse_qwen_xml(s, i, schemas, calls);
    case ToolFormat::kLlama3: return parse_llama(s, i, calls);
    case ToolFormat::kMistral: return parse_mistral(s, i, calls);
    case ToolFormat::kDeepSeek: return parse_deepseek(s, i, calls);
    case ToolFormat::kHarmony:  // HarmonyParser
    case ToolFormat::kNone: break;
  }
  return Got::kNo;
}

// The marker that opens a call anywhere in the text.
std::string_view opener(ToolFormat f) {
  switch (f) {
    case ToolFormat::kQwen:
    case ToolFormat::kQwenXml: return kQwenOpen;
    case ToolFormat::kLlama3: return kPythonTag;
    case ToolFormat::kMistral: return kMistralOpen;
    case ToolFormat::kDeepSeek: return kDsCallsBegin;
    case ToolFormat::kHarmony:
    case ToolFormat::kNone: break;
  }
  return {};
}

// `end` moved back over whitespace, not before `from`.
size_t trim_back(std::string_view s, size_t from, size_t end) {
  while (end > from && is_ws(s[end - 1])) --end;
  return end;
}

}  // namespace

ToolFormat detect_tool_format(std::string_view src) {
  if (src.find("<|channel|>") != std::string_view::npos && src.find("<|call|>") != std::string_view::npos)
    return ToolFormat::kHarmony;
  if (src.find("<function=") != std::string_view::npos && src.find(kQwenOpen) != std::string_view::npos)
    return ToolFormat::kQwenXml;
  if (src.find(kDsCallsBegin) != std::string_view::npos) return ToolFormat::kDeepSeek;
  if (src.find(kMistralOpen) != std::string_view::npos) return ToolFormat::kMistral;
  if (src.find(kQwenOpen) != std::string_view::npos) return ToolFormat::kQwen;
  if (src.find(kPythonTag) != std::string_view::npos ||
      (src.find("\"parameters\": ") != std::string_view::npos && src.find("tool_call") != std::string_view::npos))
    return ToolFormat::kLlama3;
  return ToolFormat::kNone;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::kQwen: return "qwen";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kMistral: return "mistral";
    case ToolFormat::kDeepSeek: return "deepseek";
    case ToolFormat::kQwenXml: return "qwen-xml";
    case ToolFormat::kHarmony: return "harmony";
    case ToolFormat::kNone: break;
  }
  return "none";
}

ToolSchemas tool_schemas(const ojson& tools) {
  ToolSchemas out;
  if (!tools.is_array()) return out;
  for (const ojson& t : tools) {
    if (!t.is_object()) continue;
    const ojson* fn = &t;
    if (auto f = t.find("function"); f != t.end() && f->is_object()) fn = &*f;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) continue;
    for (const char* key : {"parameters", "input_schema"})
      if (auto p = fn->find(key); p != fn->end() && p->is_object()) {
        out.parameters[name->get<std::string>()] = *p;
        break;
      }
  }
  return out;
}

std::string new_tool_call_id(ToolFormat f) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)};
  std::uniform_int_distribution<int> pick(0, int(sizeof kAlnum) - 2);
  const bool mistral = f == ToolFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int k = 0; k < (mistral ? 9 : 24); ++k) id += kAlnum[pick(rng)];
  return id;
}

std::string forced_call_prefix(ToolFormat f, const std::string& name) {
  const std::string named = "{\"name\": " + nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  switch (f) {
    case ToolFormat::kQwen: return std::string(kQwenOpen) + "\n" + (name.empty() ? "" : named);
    case ToolFormat::kLlama3: return name.empty() ? "{\"name\": \"" : named;
    case ToolFormat::kMistral: return std::string(kMistralOpen) + "[" + (name.empty() ? "" : named);
    case ToolFormat::kDeepSeek:
      return std::string(kDsCallsBegin) + std::string(kDsCallBegin) + "function" + std::string(kDsSep) + name;
    case ToolFormat::kQwenXml: return std::string(kQwenOpen) + "\n<function=" + (name.empty() ? "" : name + ">\n");
    case ToolFormat::kHarmony:
      return "<|channel|>commentary to=functions." + (name.empty() ? "" : name + " <|constrain|>json<|message|>");
    case ToolFormat::kNone: break;
  }
  return "";
}

std::string_view call_region_end(ToolFormat f) {
  switch (f) {
    case ToolFormat::kQwen: return kQwenClose;
    case ToolFormat::kLlama3: return "}";
    case ToolFormat::kMistral: return "]";
    case ToolFormat::kDeepSeek: return kDsCallsEnd;
    case ToolFormat::kQwenXml: return kQwenClose;
    case ToolFormat::kHarmony: return "<|call|>";
    case ToolFormat::kNone: break;
  }
  return {};
}

bool call_region_end_is_eog(ToolFormat f) { return f == ToolFormat::kHarmony; }

ToolCallParser::ToolCallParser(ToolFormat f, std::function<std::string()> new_id,
                               std::shared_ptr<const ToolSchemas> schemas)
    : f_(f), new_id_(std::move(new_id)), schemas_(std::move(schemas)) {
  if (!new_id_) new_id_ = [f] { return new_tool_call_id(f); };
  if (f_ == ToolFormat::kHarmony) harmony_ = std::make_unique<HarmonyParser>(new_id_, schemas_ != nullptr);
}

ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;

void ToolCallParser::emit_content(size_t end, ToolParse& out) {
  if (end <= pos_) return;
  out.content.append(buf_, pos_, end - pos_);
  pos_ = end;
  after_call_ = false;
}

// Decides as much of buf_[pos_..] as the text allows:
//
//   [ decided ][ content ][ ws ][ opener ... call so far ]
//              ^pos_      released once the call completes (ws dropped) or fails
//
// A Llama call has no marker: a '{' at the start of the reply or right after a call.
void ToolCallParser::advance(bool at_end, ToolParse& out) {
  if (f_ == ToolFormat::kNone) {
    emit_content(buf_.size(), out);
    return;
  }
  const std::string_view open = opener(f_);
  for (;;) {
    const std::string_view s = buf_;
    const bool call_position = f_ == ToolFormat::kLlama3 && (pos_ == 0 || after_call_);
    if (after_call_) {
      // Whitespace (Llama: and ';') between and after calls is dropped.
      size_t j = pos_;
      while (j < s.size() && (is_ws(s[j]) || (f_ == ToolFormat::kLlama3 && s[j] == ';'))) ++j;
      if (j == s.size()) {
        if (at_end) pos_ = j;
        return;
      }
      pos_ = j;
    }
    size_t at = std::string_view::npos;
    if (call_position) {
      size_t j = pos_;
      skip_ws(s, j);
      if (j == s.size() && !at_end) return;  // only whitespace yet
      if (j < s.size() && s[j] == '{') at = j;
    }
    if (at == std::string_view::npos) at = s.find(open, pos_);
    if (at == std::string_view::npos) {
      // No opener: everything but a possible opener start (and the whitespace before
      // it, which a call would drop) is content.
      size_t end = s.size();
      if (!at_end) end = trim_back(s, pos_, s.size() - opener_prefix_at_end(s, pos_, open));
      emit_content(end, out);
      return;
    }
    size_t i = at;
    std::vector<ToolCall> calls;
    Got g = parse_call(f_, s, i, schemas_.get(), calls);
    if (g == Got::kMore && at_end) g = Got::kNo;
    if (g == Got::kDone) {
      emit_content(trim_back(s, pos_, at), out);
      for (ToolCall& c : calls) {
        c.id = new_id_();
        out.calls.push_back(std::move(c));
        ++n_calls_;
      }
      pos_ = i;
      after_call_ = true;
      continue;
    }
    if (g == Got::kMore) {
      emit_content(trim_back(s, pos_, at), out);
      return;
    }
    // Not a call: its first byte is content; look again after it.
    emit_content(at + 1, out);
  }
}

ToolParse ToolCallParser::push(std::string_view text) {
  if (harmony_) {
    ToolParse out = harmony_->push(text);
    n_calls_ += int(out.calls.size());
    return out;
  }
  ToolParse out;
  buf_.append(text);
  advance(false, out);
  return out;
}

ToolParse ToolCallParser::finish() {
  if (harmony_) {
    ToolParse out = harmony_->finish();
    n_calls_ += int(out.calls.size());
    return out;
  }
  ToolParse out;
  advance(true, out);
  return out;
}

ToolParse parse_tool_calls(ToolFormat f, std::string_view text, std::function<std::string()> new_id,
                           std::shared_ptr<const ToolSchemas> schemas) {
  ToolCallParser p(f, std::move(new_id), std::move(schemas));
  ToolParse out = p.push(text);
  ToolParse rest = p.finish();
  out.content += rest.content;
  out.reasoning += rest.reasoning;
  for (ToolCall& c : rest.calls) out.calls.push_back(std::move(c));
  return out;
}

}  // namespace pc::server
