// The grammars API requests ask for: the one door from request fields to a Grammar.
//
//   from_response_format   OpenAI chat `response_format`, Responses `text.format`,
//                          Anthropic `output_config.format`:
//                            {"type": "text"}                          → null (free text)
//                            {"type": "json_object"}                   → any JSON object
//                            {"type": "json_object", "schema": S}      → S (llama-server)
//                            {"type": "json_schema", "json_schema": {"name", "schema": S, "strict"}}
//                            {"type": "json_schema", "name", "schema": S, "strict"}  (Responses, Anthropic)
//   from_json_schema       a JSON Schema (llama-server's `json_schema` field)
//   from_gbnf              GBNF text (llama-server's `grammar` field)
//
// A json_schema format without a schema allows any JSON value. `strict: false` is
// enforced all the same (an output that satisfies the schema satisfies a non-strict
// request). Errors are GrammarError whose param is the path of the offending field
// inside the value given ("json_schema.schema.properties.x.pattern").
#pragma once
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace pc::grammar {

std::shared_ptr<const Grammar> from_response_format(const nlohmann::ordered_json& format);
std::shared_ptr<const Grammar> from_response_format(const nlohmann::json& format);
std::shared_ptr<const Grammar> from_json_schema(const nlohmann::ordered_json& schema);
std::shared_ptr<const Grammar> from_json_schema(const nlohmann::json& schema);
std::shared_ptr<const Grammar> from_gbnf(std::string_view text);
std::shared_ptr<const Grammar> any_json_object();

}  // namespace pc::grammar
