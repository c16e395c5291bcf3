// The grammar of a forced call in the formats whose call is not one JSON object
// (tool_grammar.h): Qwen3.5 / Qwen3-Coder XML (kQwenXml) and gpt-oss harmony (kHarmony).
// Each tool the call may be of is an alternative; a tool given a schema has its
// arguments follow it, one given none takes any arguments.
//
//   kQwenXml, after "<tool_call>\n<function=" (named: after "<function=NAME>\n"):
//     NAME ">\n"  ( "<parameter=" P ">\n" VALUE "\n</parameter>\n" )*  "</function>\n</tool_call>"
//   The parameters are the schema's properties, in its order, each at most once, the
//   required ones always. VALUE is what the parser (tool_calls_xml.cc) reads back as a
//   value of the property's schema: text for a property it keeps as text (no type or a
//   string type: any text without </parameter>, <parameter= or </function>, or the
//   schema's const, enum, format or length), else JSON (JsonText::kXml).
//
//   kHarmony, after "<|channel|>commentary to=functions." (named: after "<|message|>"):
//     NAME " <|constrain|>json<|message|>" ARGS
//   ARGS a JSON object (JsonText::kHarmony); the reply stops after it (its <|call|> is
//   the end of generation the parser does without).
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat/tool_calls.h"

namespace pc::server {

class FormatCallGrammar {
 public:
  explicit FormatCallGrammar(ToolFormat f);  // kQwenXml or kHarmony
  // One tool: `parameters` the schema its arguments follow, null for any arguments.
  // Throws grammar::GrammarError whose param is the path within `parameters`.
  void add(const std::string& name, const nlohmann::ordered_json* parameters);
  // The GBNF text. `named`: the forced prefix holds the name (one tool added).
  std::string gbnf(bool named) const;

 private:
  std::string xml_arguments(const nlohmann::ordered_json& parameters, const std::string& prefix);
  std::string xml_text_value(const nlohmann::ordered_json& parameters, const nlohmann::ordered_json& schema,
                             const std::string& path, int depth);

  ToolFormat f_;
  std::vector<std::pair<std::string, std::string>> tools_;  // name, the rule of its arguments
  std::string rules_;
  std::set<std::string> formats_;
  int n_ = 0;  // rules made so far
};

}  // namespace pc::server
