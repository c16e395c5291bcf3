// Function tools with "strict": true, when tool_choice forces a call: the grammar the
// rest of the call must follow, so its arguments satisfy the tool's parameters schema
// (grammar/json_schema.h).
//
// The reply starts with the format's call opener (forced_call_prefix, tool_calls.h);
// the grammar takes over after it:
//
//   format   named choice (prefix ends after the name)        "required" (prefix ends before the call)
//   qwen     , "arguments": ARGS }  \n</tool_call>               {"name": N, "arguments": ARGS}  \n</tool_call>
//   mistral  , "arguments": ARGS } ]                             {"name": N, "arguments": ARGS} ]
//   llama3   , "parameters": ARGS }                              (not constrained)
//   qwen-xml PARAMETERS </function>\n</tool_call>                N>\n PARAMETERS </function>\n</tool_call>
//   harmony  ARGS                                                N <|constrain|>json<|message|> ARGS
//   deepseek (not constrained)
//
// (qwen-xml and harmony: tool_grammar_formats.h.) For "required", every tool is an
// alternative: a strict tool's arguments follow its schema, another's are any JSON
// object (qwen-xml: any parameters). Null when no tool involved is strict, or the
// format is not constrained (docs/api.md "Structured output").
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "server/chat/tool_calls.h"

namespace pc::server {

// `raw` is the body's text (tools are read from it with their key order); `name` the
// named choice's function, "" for "required". ApiError 400 naming
// tools[i].function.parameters... for a strict schema the engine cannot enforce.
std::shared_ptr<const grammar::Grammar> forced_call_grammar(ToolFormat f, std::string_view raw,
                                                           const std::string& name);

}  // namespace pc::server
