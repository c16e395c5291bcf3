#include "server/api/structured_output.h"

#include "grammar/response_format.h"
#include "server/api/api_error.h"

namespace pc::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// body[k0][k1]... read from `raw` with key order kept; falls back to the parsed value.
ojson ordered(const json& value, std::string_view raw, std::initializer_list<const char*> path) {
  if (!raw.empty()) {
    ojson o = ojson::parse(raw.begin(), raw.end(), nullptr, false);
    const ojson* at = &o;
    for (const char* k : path) {
      if (!at->is_object() || !at->contains(k)) {
        at = nullptr;
        break;
      }
      at = &(*at)[k];
    }
    if (at) return *at;
  }
  return ojson::parse(value.dump());
}

std::string join(const std::string& field, const std::string& param) { return param.empty() ? field : field + "." + param; }

// A GrammarError from the value at `field` as a 400 naming the full path.
[[noreturn]] void reject(const std::string& field, const grammar::GrammarError& e) {
  const std::string param = join(field, e.param);
  const std::string what = e.what();
  const bool unsupported = what.find("unsupported") != std::string::npos || what.find("not supported") != std::string::npos;
  // The message names the whole path too: Anthropic's error shape has no param.
  throw bad_field(param, "'" + param + "': " + what, unsupported ? "unsupported_parameter" : "invalid_value");
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

std::shared_ptr<const grammar::Grammar> parse_output_constraint(const json& body, std::string_view raw) {
  const json* rf = field(body, "response_format");
  const json* js = field(body, "json_schema");
  const json* gb = field(body, "grammar");
  if (int(rf != nullptr) + int(js != nullptr) + int(gb != nullptr) > 1)
    throw bad_field(gb ? "grammar" : "json_schema",
                    "give at most one of 'response_format', 'json_schema' and 'grammar'");
  try {
    if (rf) {
      if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
        throw bad_field("response_format", "'response_format' must be an object with a string 'type'", "invalid_type");
      try {
        return grammar::from_response_format(ordered(*rf, raw, {"response_format"}));
      } catch (const grammar::GrammarError& e) {
        reject("response_format", e);
      }
    }
    if (js) {
      try {
        return grammar::from_json_schema(ordered(*js, raw, {"json_schema"}));
      } catch (const grammar::GrammarError& e) {
        reject("json_schema", e);
      }
    }
    if (gb) {
      if (!gb->is_string()) throw bad_field("grammar", "'grammar' must be a string of GBNF", "invalid_type");
      if (gb->get_ref<const std::string&>().empty()) return nullptr;  // llama-server: "" = none
      try {
        return grammar::from_gbnf(gb->get_ref<const std::string&>());
      } catch (const grammar::GrammarError& e) {
        reject("grammar", e);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad_field(rf ? "response_format" : "json_schema", std::string("invalid schema value: ") + e.what());
  }
  return nullptr;
}

std::shared_ptr<const grammar::Grammar> parse_anthropic_output_format(const json& body, std::string_view raw) {
  const json* oc = field(body, "output_config");
  if (!oc) return nullptr;
  if (!oc->is_object()) throw bad_field("output_config", "'output_config' must be an object", "invalid_type");
  const json* f = field(*oc, "format");
  if (!f) return nullptr;
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    throw bad_field("output_config.format", "'output_config.format' must be an object with a string 'type'",
                    "invalid_type");
  if ((*f)["type"] != "json_schema")
    throw bad_field("output_config.format.type", "'output_config.format.type' must be \"json_schema\"");
  if (!f->contains("schema"))
    throw bad_field("output_config.format.schema", "'output_config.format' needs a 'schema'",
                    "missing_required_parameter");
  try {
    return grammar::from_response_format(ordered(*f, raw, {"output_config", "format"}));
  } catch (const grammar::GrammarError& e) {
    reject("output_config.format", e);
  }
}

std::shared_ptr<const grammar::Grammar> parse_responses_text_format(const json& body, std::string_view raw) {
  const json* text = field(body, "text");
  if (!text) return nullptr;
  if (!text->is_object()) throw bad_field("text", "'text' must be an object", "invalid_type");
  const json* f = field(*text, "format");
  if (!f) return nullptr;
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    throw bad_field("text.format", "'text.format' must be an object with a string 'type'", "invalid_type");
  try {
    return grammar::from_response_format(ordered(*f, raw, {"text", "format"}));
  } catch (const grammar::GrammarError& e) {
    reject("text.format", e);
  } catch (const nlohmann::json::exception& e) {
    throw bad_field("text.format", std::string("invalid schema value: ") + e.what());
  }
}

}  // namespace pc::server
