// How a chat request's messages end in the rendered prompt: with the template's
// generation prompt (the default), with nothing after the last message
// (add_generation_prompt: false), or inside a final assistant message that the model
// continues (continue_final_message; Anthropic's prefill):
//
//   rendered with the final message:  ...<|im_start|>assistant\nOnce upon<|im_end|>\n
//   continued (cut after its content): ...<|im_start|>assistant\nOnce upon
//
// The cut is found as vLLM and llama.cpp find it: the last occurrence of the message's
// content in the rendering without a generation prompt.
#pragma once
#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace pc::server {

struct ChatRender {
  bool add_generation_prompt = true;
  bool continue_final = false;  // the last message is an assistant message to continue
};

// continue_final_message and add_generation_prompt of a /v1/chat/completions body
// (booleans; add_generation_prompt defaults to !continue_final_message). 400 naming
// both when both are true, and naming continue_final_message when the last of
// `messages` is no assistant message.
ChatRender parse_chat_render(const nlohmann::json& body, const nlohmann::json& messages);

// The rendering of `messages` (as template_messages gives them) the mode asks for;
// spans as ChatTemplate::apply_with_spans gives them (without telling the generation
// prompt apart) when `spans` is true. A template that fails on a tool-call message's
// null content is tried again with "" there (tool_call_content_as_empty). Throws
// ChatTemplateError, or a 400 naming continue_final_message when the template does not
// render the final message's content as sent (there is no place to cut).
RenderedChat render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                         const nlohmann::ordered_json& extra,
                         ChatRender mode, bool spans);

}  // namespace pc::server
