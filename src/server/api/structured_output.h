// Request fields that constrain the output, turned into the grammar the engine
// enforces (GenerateRequest::grammar, grammar/response_format.h):
//
//   response_format      OpenAI chat/completions: {"type": "text" | "json_object" | "json_schema", ...}
//   json_schema          llama-server: a JSON Schema
//   grammar              llama-server: GBNF text
//   output_config.format Anthropic Messages: {"type": "json_schema", "schema": S}
//   text.format          Responses: {"type": "text" | "json_object"} or
//                        {"type": "json_schema", "name", "schema": S, "strict"}
//
// At most one of the first three per request. A bad or unsupported one is an
// ApiError 400 whose param is the offending field's path ("response_format.json_schema
// .schema.properties.age.pattern") and whose message names the keyword or rule.
#pragma once
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace pc::server {

// `raw` is the body's text: schemas are read from it again with their key order kept
// (the parsed body sorts keys), so properties come out in the order the client wrote
// them. Empty `raw`: the parsed body's order. Null: no constraint.
std::shared_ptr<const grammar::Grammar> parse_output_constraint(const nlohmann::json& body, std::string_view raw);

// Anthropic's output_config.format ({"type": "json_schema", "schema": S}); null when absent.
std::shared_ptr<const grammar::Grammar> parse_anthropic_output_format(const nlohmann::json& body,
                                                                      std::string_view raw);

// The Responses API's text.format; null when absent or {"type": "text"}.
std::shared_ptr<const grammar::Grammar> parse_responses_text_format(const nlohmann::json& body,
                                                                   std::string_view raw);

}  // namespace pc::server
