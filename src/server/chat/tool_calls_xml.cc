// kQwenXml calls (Qwen3.5, Qwen3-Coder):
//
//   <tool_call>
//   <function=NAME>
//   <parameter=ARG>
//   VALUE (any text, newlines included)
//   </parameter>
//   ...
//   </function>
//   </tool_call>
//
// Values are text; the published parsers (vLLM's qwen3_coder, llama.cpp's) convert each
// by the JSON type the tool's parameters schema gives the argument, and so does this.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "server/chat/tool_call_scan.h"

namespace pc::server::scan {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";
constexpr size_t kMaxName = 256;  // a longer name is no call

// A name up to '>' on one line: kDone with i past the '>'.
Got name_at(std::string_view s, size_t& i, std::string* out) {
  const size_t gt = s.find('>', i);
  const size_t stop = std::min(gt, s.size());
  const std::string_view piece = s.substr(i, stop - i);
  if (piece.find('\n') != std::string_view::npos || piece.find('<') != std::string_view::npos) return Got::kNo;
  if (gt == std::string_view::npos) return piece.size() > kMaxName ? Got::kNo : Got::kMore;
  if (piece.empty() || piece.size() > kMaxName) return Got::kNo;
  *out = std::string(piece);
  i = gt + 1;
  return Got::kDone;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

// The first type a schema names, "null" skipped ({"type": ["integer", "null"]}).
std::string xml_argument_type(const ojson* schema) {
  if (!schema || !schema->is_object()) return "";
  auto t = schema->find("type");
  if (t == schema->end()) return "";
  std::string type;
  if (t->is_string()) type = t->get<std::string>();
  if (t->is_array())
    for (const ojson& e : *t)
      if (e.is_string() && e.get<std::string>() != "null") {
        type = e.get<std::string>();
        break;
      }
  return lower(type);
}

bool xml_argument_is_text(const ojson* schema) {
  const std::string type = xml_argument_type(schema);
  return type.empty() || type == "string" || type == "str" || type == "text" || type == "enum";
}

const ojson* xml_argument_schema(const ojson& parameters, const std::string& key) {
  if (!parameters.is_object()) return nullptr;
  auto props = parameters.find("properties");
  if (props == parameters.end() || !props->is_object()) return nullptr;
  auto p = props->find(key);
  if (p == props->end()) return nullptr;
  // A "#/$defs/NAME" (or "#/definitions/NAME") reference: the schema it names.
  const ojson* s = &*p;
  for (int hop = 0; hop < 8 && s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string(); ++hop) {
    const std::string& ref = (*s)["$ref"].get_ref<const std::string&>();
    const ojson* target = nullptr;
    for (const char* section : {"$defs", "definitions"}) {
      const std::string prefix = std::string("#/") + section + "/";
      auto d = parameters.find(section);
      if (ref.compare(0, prefix.size(), prefix) != 0 || d == parameters.end() || !d->is_object()) continue;
      if (auto t = d->find(ref.substr(prefix.size())); t != d->end()) target = &*t;
    }
    if (!target) break;
    s = target;
  }
  return s;
}

ojson xml_argument_value(const std::string& text, const ojson* schema) {
  const std::string type = xml_argument_type(schema);
  // No schema for the argument, or a string type: the text as it is.
  if (xml_argument_is_text(schema)) return text;
  if (lower(text) == "null") return nullptr;
  if (starts_with(type, "int") || starts_with(type, "uint") || type == "long" || type == "short") {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno == 0 && !text.empty() && end == text.c_str() + text.size()) return v;
    return text;
  }
  if (starts_with(type, "num") || starts_with(type, "float") || type == "double") {
    // A number, kept integral when it is one ("3" and "3.0" are 3).
    const ojson v = ojson::parse(text, nullptr, false);
    if (!v.is_number()) return text;
    const double d = v.get<double>();
    if (v.is_number_float() && d == double(int64_t(d)) && std::abs(d) < 9e15) return int64_t(d);
    return v;
  }
  if (type == "boolean" || type == "bool") {
    const std::string l = lower(text);
    if (l == "true" || l == "false") return l == "true";
    return text;
  }
  // object, array and anything else: JSON when the text is JSON.
  const ojson v = ojson::parse(text, nullptr, false);
  return v.is_discarded() ? ojson(text) : v;
}

Got parse_qwen_xml(std::string_view s, size_t& i, const ToolSchemas* schemas, std::vector<ToolCall>& calls) {
  if (Got g = expect(s, i, kOpen); g != Got::kDone) return g;
  skip_ws(s, i);
  if (Got g = expect(s, i, kFunction); g != Got::kDone) return g;
  std::string name;
  if (Got g = name_at(s, i, &name); g != Got::kDone) return g;
  const ojson* params = nullptr;
  if (schemas) {
    auto it = schemas->parameters.find(name);
    if (it != schemas->parameters.end()) params = &it->second;
  }
  ojson args = ojson::object();
  for (;;) {
    skip_ws(s, i);
    if (Got g = expect(s, i, kFunctionEnd); g == Got::kDone) break;
    else if (g == Got::kMore) return g;
    if (Got g = expect(s, i, kParameter); g != Got::kDone) return g;
    std::string key;
    if (Got g = name_at(s, i, &key); g != Got::kDone) return g;
    // The value runs to </parameter>; a model that leaves it out ends it at the next
    // parameter or the end of the function.
    size_t end = std::string_view::npos;
    for (std::string_view stop : {kParameterEnd, kParameter, kFunctionEnd})
      end = std::min(end, s.find(stop, i));
    if (end == std::string_view::npos) return Got::kMore;
    std::string_view value = s.substr(i, end - i);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    const ojson* schema = params ? xml_argument_schema(*params, key) : nullptr;
    args[key] = xml_argument_value(std::string(value), schema);
    i = end;
    expect(s, i, kParameterEnd);  // moves past it when it is there
  }
  skip_ws(s, i);
  if (Got g = expect(s, i, kClose); g != Got::kDone) return g;
  calls.push_back({"", std::move(name), args.dump(-1, ' ', false, ojson::error_handler_t::replace)});
  return Got::kDone;
}

}  // namespace pc::server::scan
