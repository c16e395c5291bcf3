// libFuzzer target: an Anthropic Messages body (/v1/messages) translated and checked as
// the route does before any model work, then rendered with a chat template. A bad body
// must end in ApiError (a 4xx naming the field) or ChatTemplateError (400 at the HTTP
// edge); any other exception escapes and libFuzzer reports it as a crash.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "server/api/anthropic_request.h"
#include "server/api/api_error.h"
#include "server/chat/chat_request.h"
#include "server/chat/conversation.h"
#include "server/api/openai_request.h"
#include "template/builtin_templates.h"
#include "template/chat_template.h"

#ifndef PC_SHARED_DIR
#define PC_SHARED_DIR "../shared"
#endif

namespace {

using namespace pc;
using namespace pc::server;

const ChatTemplate& chat_template() {
  static const ChatTemplate t = [] {
    std::ifstream in(std::string(PC_SHARED_DIR) + "/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str().empty() ? ChatTemplate(*builtin_chat_template("chatml")) : ChatTemplate(ss.str());
  }();
  return t;
}

void decode(const std::string& text) {
  const json body = parse_body(text);
  const AnthropicTranslation t = translate_anthropic(body);
  parse_common(anthropic_common_body(body), /*chat=*/true);
  parse_reuse(body, ReusePolicy{});
  check_prompt_bytes(t.messages, 1 << 20, 4096, "messages");
  json extra = json::object();
  if (!t.tools.empty() && !anthropic_tools_off(body)) extra["tools"] = t.tools;
  const json flat = parse_tool_arguments(template_messages(t.messages));
  try {
    chat_template().apply_with_spans(flat, /*add_generation_prompt=*/true, extra, false);
  } catch (const ChatTemplateError&) {
    if (const std::optional<json> fixed = tool_call_content_as_empty(flat))
      chat_template().apply_with_spans(*fixed, /*add_generation_prompt=*/true, extra, false);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    decode(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();  // a bad body is a 4xx
  } catch (const ChatTemplateError&) {
  }
  return 0;
}
