// JSON Schema → GBNF (gbnf_parser.h), the subset constrained decoding enforces.
//
// Supported: type (a name or a list), nullable, enum, const, anyOf, oneOf (as
// anyOf: alternatives are not checked for exclusivity), allOf of one schema, $ref to
// "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed; a recursion that can
// never end is an error), properties + required + additionalProperties (false, true
// or a schema; absent means no other properties, which every output of the
// schema's own keys satisfies), items, prefixItems, minItems, maxItems, minLength,
// maxLength, format (date, time, date-time, uuid, email, ipv4), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (number or draft-4 boolean), and annotations
// (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly). Any other keyword is a GrammarError naming it and where it is,
// never ignored.
//
// Output shape: properties in the schema's order; whitespace between tokens is
// optional (one space, or a newline and up to 20 blanks); numbers have at most 16
// integer and 16 fraction digits and exponents of at most 2 digits, and bounded
// numbers no exponent and at most 6 fraction digits (so any value generated
// compares within its bounds as a double); strings use only escapes JSON parsers
// accept (no lone surrogates). The grammar can always finish: a recursion with no
// way out is rejected when the grammar is built.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace pc::grammar {

// The GBNF of a schema; throws GrammarError whose param is the path of the offending
// keyword within the schema ("properties.age.multipleOf").
std::string schema_to_gbnf(const nlohmann::ordered_json& schema);

// The GBNF of any JSON object (response_format json_object).
std::string any_object_gbnf();

// The text JSON is written into, which decides what its strings may hold:
//   kPlain    anything JSON allows
//   kHarmony  no "<|" (a gpt-oss message body ends at a harmony marker, harmony.h)
//   kXml      no "</" or "<p" (a Qwen XML call's value ends at </parameter>,
//             <parameter= or </function>, tool_calls_xml.cc)
// Outside kPlain a string with minLength/maxLength holds no '<' at all. Every string
// stays writable: '<' can be escaped as \u003c.
enum class JsonText { kPlain, kHarmony, kXml };

// The shared rules of one JsonText (whitespace, JSON strings, numbers, any value),
// named with base_rule(); a grammar holds them once per JsonText it uses.
std::string base_rules(JsonText text);
// The name of a shared rule: base_rule(kXml, "json-value") is "x-json-value".
std::string base_rule(JsonText text, const std::string& name);
// The rules of string formats (date, time, ...) as fmt-NAME, without quotes.
std::string format_rules(const std::set<std::string>& formats);
// A GBNF string literal matching exactly `bytes`.
std::string gbnf_literal(const std::string& bytes);

// Compiles the schemas of one document (a schema whose $refs resolve against it) into
// GBNF rules named with `prefix`, so that several documents share one grammar (a tool
// call offering several tools). The caller writes base_rules(text), format_rules of
// formats() and rules() into the grammar.
class SchemaCompiler {
 public:
  SchemaCompiler(const nlohmann::ordered_json& doc, std::string prefix, JsonText text = JsonText::kPlain);
  // The expression of a JSON value following `schema` (the document or a part of it,
  // found at `path` within it, which errors name). Throws GrammarError.
  std::string value(const nlohmann::ordered_json& schema, const std::string& path);
  // The rule of a string format's text (no quotes), e.g. "fmt-date"; GrammarError
  // naming path.format for one not supported.
  std::string format(const std::string& name, const std::string& path);
  const std::string& rules() const { return rules_; }
  const std::set<std::string>& formats() const { return formats_used_; }

 private:
  [[noreturn]] static void fail(const std::string& what, const std::string& param);
  std::string add_rule(const std::string& body);
  std::string b(const char* name) const { return base_rule(text_, name); }
  std::string literal_json(const nlohmann::ordered_json& v) const;
  std::string ref(const std::string& target, const std::string& path);
  std::string visit(const nlohmann::ordered_json& s, const std::string& path);
  std::string core(const nlohmann::ordered_json& s, const std::string& path);
  std::string of_type(const std::string& t, const nlohmann::ordered_json& s, const std::string& path);
  std::string string_rule(const nlohmann::ordered_json& s, const std::string& path);
  std::string number_rule(const nlohmann::ordered_json& s, const std::string& path, bool integer);
  std::string object_rule(const nlohmann::ordered_json& s, const std::string& path);
  std::string array_rule(const nlohmann::ordered_json& s, const std::string& path);

  const nlohmann::ordered_json& root_;
  std::string prefix_;
  JsonText text_;
  std::string rules_;
  int n_rules_ = 0;
  std::map<std::string, std::string> ref_rules_;
  std::set<std::string> formats_used_;
};

}  // namespace pc::grammar
