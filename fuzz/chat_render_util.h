// What the request fuzz targets share: the chat template they render with and the
// route's render step (a template error on tool-call content retried with that content
// empty, as the server does; another ChatTemplateError is the HTTP edge's 400).
#pragma once
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat/conversation.h"
#include "template/builtin_templates.h"
#include "template/chat_template.h"

#ifndef PC_SHARED_DIR
#define PC_SHARED_DIR "../shared"
#endif

namespace pc::fuzz {

// Qwen2.5's template (tools and tool calls rendered) from the shared folder, else the
// built-in chatml.
inline const ChatTemplate& request_chat_template() {
  static const ChatTemplate t = [] {
    std::ifstream in(std::string(PC_SHARED_DIR) + "/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str().empty() ? ChatTemplate(*builtin_chat_template("chatml")) : ChatTemplate(ss.str());
  }();
  return t;
}

// The rendered chat of template messages `flat`, or nothing when only the retry could
// have rendered it and there was nothing to retry.
inline std::optional<RenderedChat> render_as_the_route(const nlohmann::json& flat, const nlohmann::json& extra) {
  try {
    return request_chat_template().apply_with_spans(flat, /*add_generation_prompt=*/true, extra, false);
  } catch (const ChatTemplateError&) {
    const std::optional<nlohmann::json> fixed = server::tool_call_content_as_empty(flat);
    if (!fixed) return std::nullopt;
    return request_chat_template().apply_with_spans(*fixed, /*add_generation_prompt=*/true, extra, false);
  }
}

}  // namespace pc::fuzz
