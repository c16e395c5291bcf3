#include "grammar/response_format.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"

namespace pc::grammar {

namespace {

using ojson = nlohmann::ordered_json;

std::string prefixed(const std::string& prefix, const std::string& param) {
  if (prefix.empty()) return param;
  return param.empty() ? prefix : prefix + "." + param;
}

// A grammar compiled from text the compiler wrote: an error in it is the
// compiler's, but it is reported as the schema's (the param stays the schema).
std::shared_ptr<const Grammar> compile(const std::string& gbnf, const std::string& param) {
  try {
    return parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    throw GrammarError(std::string("the schema gives an impossible grammar: ") + e.what(), param);
  }
}

}  // namespace

std::shared_ptr<const Grammar> from_json_schema(const ojson& schema) {
  return compile(schema_to_gbnf(schema), "");
}

std::shared_ptr<const Grammar> from_json_schema(const nlohmann::json& schema) {
  return from_json_schema(ojson::parse(schema.dump()));
}

std::shared_ptr<const Grammar> from_gbnf(std::string_view text) { return parse_gbnf(text); }

std::shared_ptr<const Grammar> any_json_object() {
  static const std::shared_ptr<const Grammar> g = parse_gbnf(any_object_gbnf());
  return g;
}

std::shared_ptr<const Grammar> from_response_format(const ojson& f) {
  if (!f.is_object()) throw GrammarError("must be an object", "");
  if (!f.contains("type") || !f["type"].is_string()) throw GrammarError("type must be a string", "type");
  const std::string type = f["type"].get<std::string>();
  auto schema_at = [&](const ojson& holder, const std::string& prefix) -> std::shared_ptr<const Grammar> {
    if (!holder.contains("schema")) return compile(schema_to_gbnf(ojson::object()), prefix);
    try {
      return from_json_schema(holder["schema"]);
    } catch (const GrammarError& e) {
      throw GrammarError(e.what(), prefixed(prefixed(prefix, "schema"), e.param));
    }
  };
  if (type == "text") return nullptr;
  if (type == "json_object") return f.contains("schema") ? schema_at(f, "") : any_json_object();
  if (type == "json_schema") {
    if (f.contains("json_schema")) {
      if (!f["json_schema"].is_object()) throw GrammarError("json_schema must be an object", "json_schema");
      return schema_at(f["json_schema"], "json_schema");
    }
    return schema_at(f, "");
  }
  throw GrammarError("unsupported format type '" + type + "' (text, json_object and json_schema are)", "type");
}

std::shared_ptr<const Grammar> from_response_format(const nlohmann::json& f) {
  return from_response_format(ojson::parse(f.dump()));
}

}  // namespace pc::grammar
