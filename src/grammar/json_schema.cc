#include "grammar/json_schema.h"

#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "grammar/number_range.h"

namespace pc::grammar {

namespace {

using ojson = nlohmann::ordered_json;

// Rules every schema's grammar may use. A value's rule never includes the blanks
// after it: containers put `ws` between their tokens, and the root ends right after
// its value, so the grammar is finished (generation stops) at its last character.
constexpr const char* kBaseRules = R"(@ws ::= ( " " | "\n" [ \t]{0,20} )?
@json-char ::= [^"\\$\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" @json-u4 )
@json-u4 ::= [0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
@json-string ::= STRING
@json-int ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
@json-number ::= @json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
@json-bool ::= "true" | "false"
@json-null ::= "null"
@json-value ::= @json-object | @json-array | @json-string | @json-number | @json-bool | @json-null
@json-object ::= "{" @ws ( @json-member ( "," @ws @json-member )* )? "}"
@json-member ::= @json-string @ws ":" @ws @json-value @ws
@json-array ::= "[" @ws ( @json-value @ws ( "," @ws @json-value @ws )* )? "]"
)";

// kHarmony, kXml: a string holds no '<' but runs of them followed by a byte that
// cannot continue a marker, and may end with a run of them.
constexpr const char* kPlainString = R"("\"" @json-char* "\"")";
constexpr const char* kGuardedString = R"("\"" ( @json-char | "<"+ @json-after-lt )* "<"* "\""
@json-after-lt ::= [^"\\<%\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" @json-u4 ))";

const std::map<std::string, std::string>& format_rule_bodies() {
  static const std::map<std::string, std::string> m = {
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(fmt-date "T" fmt-time)"},
      {"uuid",
       R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
      {"email",
       R"([a-zA-Z0-9_%+-]{1,32} ( "." [a-zA-Z0-9_%+-]{1,32} ){0,3} "@" [a-zA-Z0-9]{1,32} ( "." [a-zA-Z0-9]{1,32} ){0,3} "." [a-zA-Z]{2,8})"},
      {"ipv4", R"(fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet)"},
  };
  return m;
}

// Keywords that describe a schema without constraining its values.
bool annotation(const std::string& k) {
  static const std::set<std::string> s = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly"};
  return s.count(k) > 0;
}

bool supported(const std::string& k) {
  static const std::set<std::string> s = {
      "type", "nullable", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
      "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
      "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return s.count(k) > 0 || annotation(k);
}

// A GBNF string literal matching exactly `bytes`.
std::string literal(const std::string& bytes) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string join_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

[[noreturn]] void fail_at(const std::string& what, const std::string& param) {
  throw GrammarError(what + (param.empty() ? "" : " (at " + param + ")"), param);
}

// A bound: the keyword's number, whether it is exclusive, or nullopt when absent.
struct Bound {
  bool set = false;
  double value = 0;
  bool exclusive = false;
};

int64_t count_of(const ojson& s, const char* key, const std::string& path) {
  const ojson& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    fail_at(std::string(key) + " must be a non-negative integer", join_path(path, key));
  if (v.get<int64_t>() > 10000) fail_at(std::string(key) + " above 10000 is not supported", join_path(path, key));
  return v.get<int64_t>();
}

Bound bound(const ojson& s, const char* inclusive, const char* exclusive, const std::string& path) {
  Bound b;
  if (s.contains(inclusive)) {
    if (!s[inclusive].is_number()) fail_at(std::string(inclusive) + " must be a number", join_path(path, inclusive));
    b = {true, s[inclusive].get<double>(), false};
  }
  if (s.contains(exclusive)) {
    const ojson& e = s[exclusive];
    if (e.is_boolean()) {  // draft 4: a flag on the inclusive keyword
      if (!b.set && e.get<bool>())
        fail_at(std::string(exclusive) + ": true needs " + inclusive, join_path(path, exclusive));
      b.exclusive = e.get<bool>();
    } else if (e.is_number()) {
      const double v = e.get<double>();
      const bool tighter = inclusive[1] == 'i' ? v >= b.value : v <= b.value;  // minimum: larger is tighter
      if (!b.set || tighter) b = {true, v, true};
    } else {
      fail_at(std::string(exclusive) + " must be a number", join_path(path, exclusive));
    }
  }
  if (b.set && !std::isfinite(b.value)) fail_at(std::string(inclusive) + " must be finite", join_path(path, inclusive));
  return b;
}

}  // namespace

std::string base_rule(JsonText text, const std::string& name) {
  switch (text) {
    case JsonText::kPlain: return name;
    case JsonText::kHarmony: return "h-" + name;
    case JsonText::kXml: return "x-" + name;
  }
  return name;
}

std::string base_rules(JsonText text) {
  auto replace_all = [](std::string s, std::string_view from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
  };
  std::string r = kBaseRules;
  r = replace_all(r, "STRING", text == JsonText::kPlain ? kPlainString : kGuardedString);
  r = replace_all(r, "$", text == JsonText::kPlain ? "" : "<");
  r = replace_all(r, "%", text == JsonText::kHarmony ? "|" : "/p");
  return replace_all(r, "@", base_rule(text, ""));
}

std::string gbnf_literal(const std::string& bytes) { return literal(bytes); }

std::string format_rules(const std::set<std::string>& formats) {
  std::string out;
  for (const auto& f : formats) out += "fmt-" + f + " ::= " + format_rule_bodies().at(f) + "\n";
  if (formats.count("ipv4"))
    out += "fmt-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n";
  return out;
}

SchemaCompiler::SchemaCompiler(const ojson& doc, std::string prefix, JsonText text)
    : root_(doc), prefix_(std::move(prefix)), text_(text) {}

void SchemaCompiler::fail(const std::string& what, const std::string& param) { fail_at(what, param); }

std::string SchemaCompiler::add_rule(const std::string& body) {
  const std::string name = prefix_ + "s" + std::to_string(++n_rules_);
  rules_ += name + " ::= " + body + "\n";
  return name;
}

// A constant's JSON text as a literal; outside kPlain its '<' (only ever inside a
// string) escaped, as the JsonText's strings require.
std::string SchemaCompiler::literal_json(const ojson& v) const {
  std::string text = v.dump();
  if (text_ != JsonText::kPlain)
    for (size_t at = text.find('<'); at != std::string::npos; at = text.find('<', at)) text.replace(at, 1, "\\u003c");
  return literal(text);
}

std::string SchemaCompiler::value(const ojson& schema, const std::string& path) { return visit(schema, path); }

std::string SchemaCompiler::format(const std::string& f, const std::string& path) {
  if (!format_rule_bodies().count(f)) fail("unsupported string format '" + f + "'", join_path(path, "format"));
  formats_used_.insert(f);
  if (f == "date-time") formats_used_.insert({"date", "time"});
  return "fmt-" + f;
}

// The schema a "#/$defs/NAME" (or "#/definitions/NAME") reference names, as a rule.
std::string SchemaCompiler::ref(const std::string& target, const std::string& path) {
  if (auto it = ref_rules_.find(target); it != ref_rules_.end()) return it->second;
  std::string section, name;
  for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
    const std::string p = prefix;
    if (target.compare(0, p.size(), p) == 0) {
      section = p.substr(2, p.size() - 3);
      name = target.substr(p.size());
    }
  }
  if (section.empty() || name.empty() || name.find('/') != std::string::npos)
    fail("$ref '" + target + "' is not supported (only #/$defs/NAME and #/definitions/NAME)", join_path(path, "$ref"));
  if (!root_.contains(section) || !root_[section].is_object() || !root_[section].contains(name))
    fail("$ref '" + target + "' names no definition", join_path(path, "$ref"));
  // The rule is named before its body is compiled, so a recursive reference finds it.
  std::string rule = prefix_ + "def-";
  for (char c : name) rule += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  rule += "-" + std::to_string(++n_rules_);  // unique whatever the name
  ref_rules_[target] = rule;
  const std::string body = visit(root_[section][name], section + "." + name);
  rules_ += rule + " ::= " + body + "\n";
  return rule;
}

std::string SchemaCompiler::visit(const ojson& s, const std::string& path) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail("the schema false matches nothing", path);
    return b("json-value");
  }
  if (!s.is_object()) fail("a schema must be an object or a boolean", path);
  for (const auto& [k, v] : s.items()) {
    if (!supported(k)) fail("unsupported JSON Schema keyword '" + k + "'", join_path(path, k));
    // Definitions are compiled when referenced; they must be where $ref looks.
    if ((k == "$defs" || k == "definitions") && !path.empty())
      fail("'" + k + "' is supported only at the schema's root", join_path(path, k));
  }
  std::string expr = core(s, path);
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail("nullable must be a boolean", join_path(path, "nullable"));
    if (s["nullable"].get<bool>()) expr = "( " + expr + " | " + b("json-null") + " )";
  }
  return expr;
}

std::string SchemaCompiler::core(const ojson& s, const std::string& path) {
  if (s.contains("$ref")) {
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && k != "$defs" && k != "definitions" && k != "nullable" && !annotation(k))
        fail("keyword '" + k + "' beside $ref is not supported", join_path(path, k));
    if (!s["$ref"].is_string()) fail("$ref must be a string", join_path(path, "$ref"));
    return ref(s["$ref"].get<std::string>(), path);
  }
  if (s.contains("const")) return literal_json(s["const"]);
  if (s.contains("enum")) {
    const ojson& e = s["enum"];
    if (!e.is_array() || e.empty()) fail("enum must be a non-empty array", join_path(path, "enum"));
    std::string alt;
    for (const auto& v : e) alt += (alt.empty() ? "" : " | ") + literal_json(v);
    return "( " + alt + " )";
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const ojson& list = s[key];
    const std::string p = join_path(path, key);
    if (!list.is_array() || list.empty()) fail(std::string(key) + " must be a non-empty array", p);
    if (s.contains("type") || s.contains("properties") || s.contains("items"))
      fail(std::string(key) + " beside type, properties or items is not supported", p);
    std::string alt;
    for (size_t i = 0; i < list.size(); ++i)
      alt += (i ? " | " : "") + visit(list[i], join_path(p, std::to_string(i)));
    return "( " + alt + " )";
  }
  if (s.contains("allOf")) {
    const ojson& list = s["allOf"];
    if (!list.is_array() || list.size() != 1)
      fail("allOf is supported with exactly one schema", join_path(path, "allOf"));
    return visit(list[0], join_path(path, "allOf.0"));
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& x : t) {
        if (!x.is_string()) fail("type must be a string or an array of strings", join_path(path, "type"));
        types.push_back(x.get<std::string>());
      }
    } else {
      fail("type must be a string or an array of strings", join_path(path, "type"));
    }
  } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
    types.push_back("string");
  } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
             s.contains("exclusiveMaximum")) {
    types.push_back("number");
  } else {
    return b("json-value");
  }
  std::string alt;
  for (const std::string& t : types) alt += (alt.empty() ? "" : " | ") + of_type(t, s, path);
  return types.size() == 1 ? alt : "( " + alt + " )";
}

std::string SchemaCompiler::of_type(const std::string& t, const ojson& s, const std::string& path) {
  if (t == "string") return string_rule(s, path);
  if (t == "integer" || t == "number") return number_rule(s, path, t == "integer");
  if (t == "boolean") return b("json-bool");
  if (t == "null") return b("json-null");
  if (t == "object") return object_rule(s, path);
  if (t == "array") return array_rule(s, path);
  fail("unknown type '" + t + "'", join_path(path, "type"));
}

std::string SchemaCompiler::string_rule(const ojson& s, const std::string& path) {
  if (s.contains("format")) {
    if (!s["format"].is_string()) fail("format must be a string", join_path(path, "format"));
    const std::string f = s["format"].get<std::string>();
    if (!format_rule_bodies().count(f)) fail("unsupported string format '" + f + "'", join_path(path, "format"));
    for (const char* k : {"minLength", "maxLength"})
      if (s.contains(k)) fail(std::string(k) + " beside format is not supported", join_path(path, k));
    formats_used_.insert(f);
    if (f == "date-time") formats_used_.insert({"date", "time"});
    return "( \"\\\"\" fmt-" + f + " \"\\\"\" )";
  }
  const int64_t min = s.contains("minLength") ? count_of(s, "minLength", path) : 0;
  const int64_t max = s.contains("maxLength") ? count_of(s, "maxLength", path) : -1;
  if (max >= 0 && max < min) fail("maxLength is below minLength", join_path(path, "maxLength"));
  if (min == 0 && max < 0) return b("json-string");
  const std::string rep = "{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
  return add_rule("\"\\\"\" " + b("json-char") + rep + " \"\\\"\"");
}

std::string SchemaCompiler::number_rule(const ojson& s, const std::string& path, bool integer) {
  const Bound lo = bound(s, "minimum", "exclusiveMinimum", path);
  const Bound hi = bound(s, "maximum", "exclusiveMaximum", path);
  if (!lo.set && !hi.set) return b(integer ? "json-int" : "json-number");
  NumberBounds b;
  b.lo = lo.set ? lo.value : -INFINITY;
  b.lo_exclusive = lo.exclusive;
  b.hi = hi.set ? hi.value : INFINITY;
  b.hi_exclusive = hi.exclusive;
  const std::string expr = integer ? integer_range_gbnf(b) : number_range_gbnf(b);
  if (expr.empty())
    fail(std::string("no ") + (integer ? "integer" : "number") + " satisfies minimum/maximum here (or the range is too narrow to enforce)",
         join_path(path, hi.set ? "maximum" : "minimum"));
  return add_rule(expr);
}

std::string SchemaCompiler::object_rule(const ojson& s, const std::string& path) {
  const std::string W = b("ws");
  static const ojson kEmpty = ojson::object();
  const ojson& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) fail("properties must be an object", join_path(path, "properties"));
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) fail("required must be an array of names", join_path(path, "required"));
    for (const auto& r : s["required"]) {
      if (!r.is_string()) fail("required must be an array of names", join_path(path, "required"));
      if (!props.contains(r.get<std::string>()))
        fail("required property '" + r.get<std::string>() + "' is not in properties", join_path(path, "required"));
      required.insert(r.get<std::string>());
    }
  }
  std::string extra;  // the value rule of other properties, "" when none are allowed
  if (s.contains("additionalProperties")) {
    const ojson& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) extra = visit(a, join_path(path, "additionalProperties"));
  }
  // Members in order; first[i]: members i.. when none came before, rest[i]: when
  // one did (so each is preceded by a comma). Both are rules, built back to front.
  struct Member {
    std::string kv;
    bool required;
  };
  std::vector<Member> members;
  for (const auto& [k, v] : props.items()) {
    const std::string value = visit(v, join_path(join_path(path, "properties"), k));
    members.push_back({literal_json(ojson(k)) + " " + W + " \":\" " + W + " " + value + " " + W, required.count(k) > 0});
  }
  const std::string extra_kv = extra.empty() ? "" : b("json-string") + " " + b("ws") + " \":\" " + b("ws") + " " + extra + " " + W;
  std::string rest = extra.empty() ? "" : add_rule("( \",\" " + W + " " + extra_kv + " )*");
  std::string first = extra.empty() ? "" : add_rule("( " + extra_kv + " " + rest + " )?");
  for (size_t i = members.size(); i-- > 0;) {
    const Member& m = members[i];
    const std::string new_rest =
        m.required ? "\",\" " + W + " " + m.kv + " " + rest : "( \",\" " + W + " " + m.kv + " )? " + rest;
    const std::string new_first = m.required       ? m.kv + " " + rest
                                  : first.empty() ? "( " + m.kv + " " + rest + " )?"
                                                  : m.kv + " " + rest + " | " + first;
    rest = add_rule(new_rest);
    first = add_rule(new_first);
  }
  return add_rule("\"{\" " + W + " " + first + " \"}\"");
}

std::string SchemaCompiler::array_rule(const ojson& s, const std::string& path) {
  const std::string W = b("ws");
  const int64_t min = s.contains("minItems") ? count_of(s, "minItems", path) : 0;
  const int64_t max = s.contains("maxItems") ? count_of(s, "maxItems", path) : -1;
  if (max >= 0 && max < min) fail("maxItems is below minItems", join_path(path, "maxItems"));
  if (s.contains("prefixItems")) {
    const ojson& p = s["prefixItems"];
    if (!p.is_array() || p.empty()) fail("prefixItems must be a non-empty array", join_path(path, "prefixItems"));
    if (s.contains("items") && !(s["items"].is_boolean() && !s["items"].get<bool>()))
      fail("items beside prefixItems is supported only as false", join_path(path, "items"));
    if (s.contains("minItems") || s.contains("maxItems"))
      fail("minItems/maxItems beside prefixItems are not supported", join_path(path, "prefixItems"));
    std::string body = "\"[\" " + W;
    for (size_t i = 0; i < p.size(); ++i)
      body += std::string(i ? " \",\" " + W + " " : " ") + visit(p[i], join_path(path, "prefixItems." + std::to_string(i))) + " " + W;
    return add_rule(body + " \"]\"");
  }
  std::string item = b("json-value");
  if (s.contains("items")) {
    if (s["items"].is_boolean() && !s["items"].get<bool>()) {
      if (min > 0) fail("minItems above 0 with items false matches nothing", join_path(path, "minItems"));
      return add_rule("\"[\" " + W + " \"]\"");
    }
    if (s["items"].is_array()) fail("items as an array is not supported (use prefixItems)", join_path(path, "items"));
    item = visit(s["items"], join_path(path, "items"));
  }
  if (max == 0) return add_rule("\"[\" " + W + " \"]\"");
  const std::string next = add_rule("\",\" " + W + " " + item + " " + W);
  const std::string more_min = std::to_string(min > 0 ? min - 1 : 0);
  const std::string more_max = max >= 0 ? std::to_string(max - 1) : "";
  const std::string list = item + " " + W + " " + next + "{" + more_min + "," + more_max + "}";
  return add_rule("\"[\" " + W + " " + (min > 0 ? list : "( " + list + " )?") + " \"]\"");
}


std::string schema_to_gbnf(const ojson& schema) {
  SchemaCompiler c(schema, "");
  const std::string top = c.value(schema, "");
  return "root ::= " + top + "\n" + base_rules(JsonText::kPlain) + format_rules(c.formats()) + c.rules();
}

std::string any_object_gbnf() { return "root ::= json-object\n" + base_rules(JsonText::kPlain); }

}  // namespace pc::grammar
