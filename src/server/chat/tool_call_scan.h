// Scanning helpers the tool-call parsers share (tool_calls.cc, tool_calls_xml.cc,
// harmony.cc): one step over the reply text either completes, needs more text (the
// reply has not gone far enough to decide), or fails.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat/tool_calls.h"

namespace pc::server::scan {

enum class Got { kDone, kMore, kNo };

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
inline void skip_ws(std::string_view s, size_t& i) {
  while (i < s.size() && is_ws(s[i])) ++i;
}

// s[i..] begins with `lit`: kDone (i moves past it, unless peek); s[i..] is a proper
// prefix of it: kMore; otherwise kNo.
inline Got expect(std::string_view s, size_t& i, std::string_view lit, bool peek = false) {
  const size_t n = std::min(lit.size(), s.size() - i);
  if (s.substr(i, n) != lit.substr(0, n)) return Got::kNo;
  if (n < lit.size()) return Got::kMore;
  if (!peek) i += lit.size();
  return Got::kDone;
}

// Bytes at the end of s[from..] that may begin `open` (a proper prefix of it).
inline size_t opener_prefix_at_end(std::string_view s, size_t from, std::string_view open) {
  const size_t n = std::min(open.size() - 1, s.size() - from);
  for (size_t k = n; k > 0; --k)
    if (s.substr(s.size() - k) == open.substr(0, k)) return k;
  return 0;
}

// One kQwenXml call at s[i..] (tool_calls_xml.cc): kDone appends it to `calls` and
// moves i past its </tool_call>. `schemas` may be null.
Got parse_qwen_xml(std::string_view s, size_t& i, const ToolSchemas* schemas, std::vector<ToolCall>& calls);

// kQwenXml arguments by their property schema (tool_calls_xml.cc), which the forced-call
// grammar follows too (tool_grammar_formats.cc):
// The property `key` of a tool's parameters schema, a "#/$defs/NAME" reference
// followed; null when the schema does not name it.
const nlohmann::ordered_json* xml_argument_schema(const nlohmann::ordered_json& parameters, const std::string& key);
// The type the value is converted to: the first type the schema names ("null" skipped),
// lower case; "" when it names none.
std::string xml_argument_type(const nlohmann::ordered_json* schema);
// The text is kept as it is (a string): no type, or a string type.
bool xml_argument_is_text(const nlohmann::ordered_json* schema);
// A kQwenXml argument's text as the JSON value its property schema asks for.
nlohmann::ordered_json xml_argument_value(const std::string& text, const nlohmann::ordered_json* schema);

}  // namespace pc::server::scan
