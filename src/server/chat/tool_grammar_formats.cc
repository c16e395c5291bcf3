#include "server/chat/tool_grammar_formats.h"

#include <map>

#include "grammar/json_schema.h"
#include "server/chat/tool_call_scan.h"

namespace pc::server {

namespace {

using ojson = nlohmann::ordered_json;
using grammar::GrammarError;
using grammar::JsonText;

constexpr const char* kHarmonyHeaderEnd = " <|constrain|>json<|message|>";
constexpr const char* kXmlCallEnd = "</function>\n</tool_call>";
// The markers a kQwenXml value ends at (parse_qwen_xml), after their '<'.
const char* const kXmlStops[] = {"/parameter>", "parameter=", "/function>"};

std::string join_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// x-text: any text holding none of kXmlStops. One rule per prefix of a marker read
// after a '<' (x-lt: the '<' alone); every state may end. Right-linear, so the
// matcher's stack stays flat over a long value.
std::string xml_text_rules() {
  std::map<std::string, std::string> rule = {{"", "x-lt"}};
  for (const char* stop : kXmlStops)
    for (size_t n = 1; n < std::string(stop).size(); ++n) {
      const std::string q = std::string(stop).substr(0, n);
      if (!rule.count(q)) rule[q] = "x-lt-" + std::to_string(rule.size());
    }
  std::string out = "x-text ::= ( [^<] x-text | \"<\" x-lt )?\n";
  out += "x-text-char ::= [^<]\n";
  for (const auto& [q, name] : rule) {
    std::string seen, alts;
    for (const char* stop : kXmlStops) {
      const std::string s = stop;
      if (s.compare(0, q.size(), q) != 0) continue;
      const char c = s[q.size()];
      if (seen.find(c) != std::string::npos) continue;
      seen += c;
      if (q.size() + 1 < s.size()) alts += " | " + grammar::gbnf_literal(std::string(1, c)) + " " + rule.at(q + c);
    }
    out += name + " ::= ( \"<\" x-lt | [^<" + seen + "] x-text" + alts + " )?\n";
  }
  return out;
}

// Any arguments of a tool without a schema: parameters of any name, text values.
constexpr const char* kXmlAnyArguments =
    "x-any-arguments ::= ( \"<parameter=\" [^<>\\n]{1,256} \">\\n\" x-text \"\\n</parameter>\\n\" )*\n";

// `schema` with a list of types cut to the one the parser converts to (and null).
ojson parser_typed(const ojson& schema) {
  if (!schema.is_object() || !schema.contains("type") || !schema["type"].is_array()) return schema;
  ojson types = ojson::array();
  const std::string first = scan::xml_argument_type(&schema);
  bool null = false;
  for (const ojson& t : schema["type"]) null = null || t == "null";
  for (const ojson& t : schema["type"])
    if (t.is_string() && t.get<std::string>() == first && types.empty()) types.push_back(t);
  if (null) types.push_back("null");
  ojson out = schema;
  out["type"] = types;
  return out;
}

}  // namespace

FormatCallGrammar::FormatCallGrammar(ToolFormat f) : f_(f) {}

// A text value of the schema: what the parser keeps as a string that satisfies it.
std::string FormatCallGrammar::xml_text_value(const ojson& parameters, const ojson& s, const std::string& path,
                                              int depth) {
  if (!s.is_object()) return "x-text";
  if (s.contains("const")) {
    if (!s["const"].is_string())
      throw GrammarError("the qwen-xml call format writes an argument without a type as text: a const that is not a "
                         "string cannot be written (give the property a type)", join_path(path, "const"));
    return grammar::gbnf_literal(s["const"].get<std::string>());
  }
  if (s.contains("enum")) {
    std::string alts;
    for (const ojson& v : s["enum"])
      if (v.is_string()) alts += (alts.empty() ? "" : " | ") + grammar::gbnf_literal(v.get<std::string>());
    if (alts.empty())
      throw GrammarError("the qwen-xml call format writes an argument without a type as text: an enum without "
                         "strings cannot be written (give the property a type)", join_path(path, "enum"));
    return "( " + alts + " )";
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    // The alternatives a text satisfies: string-typed ones, or strings by const or enum.
    std::string alts;
    for (size_t i = 0; i < s[key].size() && depth < 8; ++i) {
      const ojson& m = s[key][i];
      const bool text = m.is_object() && (m.contains("type") || m.contains("const") || m.contains("enum")) &&
                        scan::xml_argument_is_text(&m);
      if (!text) continue;
      try {
        alts += (alts.empty() ? "" : " | ") +
                xml_text_value(parameters, m, join_path(path, std::string(key) + "." + std::to_string(i)), depth + 1);
      } catch (const GrammarError&) {
      }
    }
    if (alts.empty())
      throw GrammarError(std::string("the qwen-xml call format writes an argument without a type as text, and no "
                                     "alternative of its ") + key + " is a string (give the property a type)",
                         join_path(path, key));
    return "( " + alts + " )";
  }
  if (s.contains("format")) {
    grammar::SchemaCompiler c(parameters, "", JsonText::kXml);
    const std::string rule = c.format(s["format"].get<std::string>(), path);
    formats_.insert(c.formats().begin(), c.formats().end());
    return rule;
  }
  if (s.contains("minLength") || s.contains("maxLength")) {
    const int64_t min = s.value("minLength", int64_t(0));
    const int64_t max = s.value("maxLength", int64_t(-1));
    return "x-text-char{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
  }
  return "x-text";
}

// The parameters of a strict tool: its properties in order, the required ones always.
std::string FormatCallGrammar::xml_arguments(const ojson& parameters, const std::string& prefix) {
  if (!parameters.is_object())
    throw GrammarError("the qwen-xml call format writes arguments as parameters: the schema must be an object schema");
  for (const char* key : {"anyOf", "oneOf", "allOf", "$ref"})
    if (parameters.contains(key))
      throw GrammarError(std::string("the qwen-xml call format writes arguments as the parameters' properties: '") +
                             key + "' at the root of the parameters is not supported",
                         key);
  if (parameters.contains("type") && scan::xml_argument_type(&parameters) != "object")
    throw GrammarError("the qwen-xml call format writes arguments as parameters: the type must be \"object\"", "type");
  const ojson none = ojson::object();
  const ojson& props = parameters.contains("properties") ? parameters["properties"] : none;
  std::set<std::string> required;
  if (parameters.contains("required"))
    for (const ojson& r : parameters["required"]) required.insert(r.get<std::string>());
  grammar::SchemaCompiler json(parameters, prefix, JsonText::kXml);
  std::string seq;
  for (const auto& [key, unused] : props.items()) {
    const std::string path = "properties." + key;
    if (key.empty() || key.size() > 256 || key.find_first_of("<>\n") != std::string::npos)
      throw GrammarError("the qwen-xml call format cannot write the parameter name '" + key +
                             "' (empty, over 256 bytes, or holding '<', '>' or a newline)",
                         path);
    const ojson* schema = scan::xml_argument_schema(parameters, key);
    const std::string value = scan::xml_argument_is_text(schema) ? xml_text_value(parameters, *schema, path, 0)
                                                                 : json.value(parser_typed(*schema), path);
    const std::string rule = prefix + "p" + std::to_string(++n_);
    rules_ += rule + " ::= " + grammar::gbnf_literal("<parameter=" + key + ">\n") + " " + value + " " +
              grammar::gbnf_literal("\n</parameter>\n") + "\n";
    seq += " " + rule + (required.count(key) ? "" : "?");
  }
  rules_ += json.rules();
  formats_.insert(json.formats().begin(), json.formats().end());
  const std::string rule = prefix + "arguments";
  rules_ += rule + " ::=" + (seq.empty() ? " \"\"" : seq) + "\n";
  return rule;
}

void FormatCallGrammar::add(const std::string& name, const ojson* parameters) {
  const std::string prefix = "t" + std::to_string(tools_.size()) + "-";
  if (!parameters) {
    tools_.push_back({name, f_ == ToolFormat::kHarmony ? "h-json-object" : "x-any-arguments"});
    return;
  }
  grammar::schema_to_gbnf(*parameters);  // the schema's keywords checked as every strict schema's are
  if (f_ == ToolFormat::kQwenXml) {
    tools_.push_back({name, xml_arguments(*parameters, prefix)});
    return;
  }
  grammar::SchemaCompiler json(*parameters, prefix, JsonText::kHarmony);
  const std::string args = json.value(*parameters, "");
  rules_ += json.rules();
  formats_.insert(json.formats().begin(), json.formats().end());
  tools_.push_back({name, args});
}

std::string FormatCallGrammar::gbnf(bool named) const {
  const bool xml = f_ == ToolFormat::kQwenXml;
  std::string root;
  for (const auto& [name, args] : tools_) {
    std::string alt = args;
    if (!named) alt = grammar::gbnf_literal(name + (xml ? ">\n" : kHarmonyHeaderEnd)) + " " + args;
    root += (root.empty() ? "" : " | ") + alt;
  }
  if (xml) root = "( " + root + " ) " + grammar::gbnf_literal(kXmlCallEnd);
  std::string out = "root ::= " + root + "\n";
  out += grammar::base_rules(xml ? JsonText::kXml : JsonText::kHarmony);
  if (xml) out += xml_text_rules() + kXmlAnyArguments;
  return out + grammar::format_rules(formats_) + rules_;
}

}  // namespace pc::server
