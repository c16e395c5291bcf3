// libFuzzer target: an Anthropic Messages body (/v1/messages) translated and checked as
// the route does before any model work, then rendered with a chat template. A bad body
// must end in ApiError (a 4xx naming the field) or ChatTemplateError (400 at the HTTP
// edge); any other exception escapes and libFuzzer reports it as a crash.
#include <cstdint>
#include <string>

#include "server/api/anthropic_request.h"
#include "server/api/api_error.h"
#include "server/chat/chat_request.h"
#include "server/chat/conversation.h"
#include "server/api/openai_request.h"

#include "chat_render_util.h"

namespace {

using namespace pc;
using namespace pc::server;

void decode(const std::string& text) {
  const json body = parse_body(text);
  const AnthropicTranslation t = translate_anthropic(body);
  parse_common(anthropic_common_body(body), /*chat=*/true);
  parse_reuse(body, ReusePolicy{});
  check_prompt_bytes(t.messages, 1 << 20, 4096, "messages");
  json extra = json::object();
  if (!t.tools.empty() && !anthropic_tools_off(body)) extra["tools"] = t.tools;
  const json flat = parse_tool_arguments(template_messages(t.messages));
  fuzz::render_as_the_route(flat, extra);
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
