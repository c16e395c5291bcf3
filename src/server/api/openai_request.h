// OpenAI request fields → engine parameters: the JSON body, the sampling and stop
// fields both routes share, cache reuse and tool_choice. Needs no model: a bad field is an
// ApiError 400 naming it (fuzz/openai_request_fuzz.cc).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/api/request_defaults.h"
#include "server/chat/tool_calls.h"

namespace pc::server {

using json = nlohmann::json;

// Fields shared by /v1/completions and /v1/chat/completions.
struct CommonParams {
  std::string model;                 // as requested ("" = not given)
  GenerateRequest gen;               // sampling, max_tokens, stop_at_eog (prompt/tenant later)
  bool max_tokens_given = false;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  std::string cache_salt;
};

// A chat request's tool_choice.
struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: the function
  bool forces() const { return mode == Mode::kRequired || mode == Mode::kNamed; }
};

// tool_choice ("auto" default, "none", "required", {"type": "function", "function":
// {"name": ...}}) checked against `tools` and the template's call format. 400 naming
// tool_choice when it is malformed, needs tools the request lacks, names no given
// tool, or forces a call the template has no format for (unsupported_parameter:
// enforcing starts the reply with the format's call opener).
ToolChoice parse_tool_choice(const json& body, ToolFormat format);

// Validates and maps the fields; throws ApiError (400, naming the field).
// `chat` selects the defaults (chat: max_tokens up to the context; completions: 16);
// `defaults` fills the sampling fields and max_tokens the body leaves out.
// response_format, json_schema and grammar become gen.grammar (structured_output.h);
// `raw`, the body's text, keeps a schema's property order.
CommonParams parse_common(const json& body, bool chat, const RequestDefaults& defaults = {},
                          std::string_view raw = {});

// The request's cache_reuse, cache_reuse_policy and cache_reuse_budget over `defaults`
// (what the server uses when a field is absent or null); ApiError 400 naming a bad field.
ReusePolicy parse_reuse(const json& body, ReusePolicy defaults);

// The request body as a JSON object; ApiError 400 when it is not one.
json parse_body(const std::string& body);

}  // namespace pc::server
