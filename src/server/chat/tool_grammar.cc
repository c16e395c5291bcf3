#include "server/chat/tool_grammar.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "server/api/api_error.h"
#include "server/chat/tool_grammar_formats.h"

namespace pc::server {

namespace {

using ojson = nlohmann::ordered_json;

bool strict(const ojson& fn) { return fn.contains("strict") && fn["strict"].is_boolean() && fn["strict"].get<bool>(); }

// The tool's parameters, or any object when it has none or is not strict.
ojson arguments_schema(const ojson& fn) {
  if (strict(fn) && fn.contains("parameters") && fn["parameters"].is_object()) return fn["parameters"];
  return {{"type", "object"}, {"additionalProperties", true}};
}

// The GBNF of `schema` with its root renamed `body`, under a root of `pre body post`.
std::string wrap(const std::string& schema_gbnf, const std::string& pre, const std::string& post) {
  const size_t eol = schema_gbnf.find('\n');
  const std::string first = schema_gbnf.substr(0, eol);  // "root ::= X"
  return "root ::= " + pre + " call-body " + post + "\ncall-body" + first.substr(4) + schema_gbnf.substr(eol);
}

// kQwenXml and kHarmony (tool_grammar_formats.h): the tools the call may be of
// (`name`'s, or all), each strict one with its parameters schema.
std::shared_ptr<const grammar::Grammar> format_call_grammar(ToolFormat f, const ojson& tools, const std::string& name,
                                                            std::string& where) {
  FormatCallGrammar g(f);
  bool any_strict = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& fn = tools[i]["function"];
    if (!name.empty() && fn["name"] != name) continue;
    where = "tools[" + std::to_string(i) + "].function.parameters";
    const bool follows = strict(fn) && fn.contains("parameters") && fn["parameters"].is_object();
    any_strict = any_strict || strict(fn);
    g.add(fn["name"].get<std::string>(), follows ? &fn["parameters"] : nullptr);
  }
  if (!any_strict) return nullptr;
  where = "tools";
  return grammar::parse_gbnf(g.gbnf(!name.empty()));
}

}  // namespace

std::shared_ptr<const grammar::Grammar> forced_call_grammar(ToolFormat f, std::string_view raw, const std::string& name) {
  if (f == ToolFormat::kDeepSeek || f == ToolFormat::kNone) return nullptr;
  const ojson body = ojson::parse(raw.begin(), raw.end(), nullptr, false);
  if (!body.is_object() || !body.contains("tools") || !body["tools"].is_array()) return nullptr;
  const ojson& tools = body["tools"];
  std::string close = f == ToolFormat::kQwen ? R"("\n</tool_call>")" : f == ToolFormat::kMistral ? R"("]")" : "";
  std::string where;  // the field a compile error is reported at
  try {
    if (f == ToolFormat::kQwenXml || f == ToolFormat::kHarmony) return format_call_grammar(f, tools, name, where);
    if (!name.empty()) {
      for (size_t i = 0; i < tools.size(); ++i) {
        const ojson& fn = tools[i]["function"];
        if (fn["name"] != name) continue;
        if (!strict(fn)) return nullptr;
        where = "tools[" + std::to_string(i) + "].function.parameters";
        const char* key = f == ToolFormat::kLlama3 ? "parameters" : "arguments";
        const std::string pre = std::string(R"(ws "," ws "\")") + key + R"(\"" ws ":" ws)";
        return grammar::parse_gbnf(wrap(grammar::schema_to_gbnf(arguments_schema(fn)), pre, "ws \"}\" " + close));
      }
      return nullptr;
    }
    if (f == ToolFormat::kLlama3) return nullptr;  // its prefix ends inside the name
    bool any_strict = false;
    ojson calls = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const ojson& fn = tools[i]["function"];
      any_strict = any_strict || strict(fn);
      ojson args = arguments_schema(fn);
      // Compiled alone first, so that an error names the tool it is in.
      where = "tools[" + std::to_string(i) + "].function.parameters";
      if (strict(fn)) grammar::schema_to_gbnf(args);
      if (args.contains("$defs") || args.contains("definitions")) {
        where = "tools[" + std::to_string(i) + "].function.parameters.$defs";
        throw grammar::GrammarError("$defs in a strict tool's parameters are supported with a named tool_choice only");
      }
      calls.push_back({{"type", "object"},
                       {"properties", {{"name", {{"const", fn["name"]}}}, {"arguments", args}}},
                       {"required", {"name", "arguments"}},
                       {"additionalProperties", false}});
    }
    if (!any_strict) return nullptr;
    where = "tools";
    return grammar::parse_gbnf(wrap(grammar::schema_to_gbnf(ojson{{"anyOf", calls}}), "", close));
  } catch (const grammar::GrammarError& e) {
    const std::string param = e.param.empty() ? where : where + "." + e.param;
    throw bad_field(param, "'" + param + "' of a strict tool: " + e.what(), "unsupported_parameter");
  }
}

}  // namespace pc::server
