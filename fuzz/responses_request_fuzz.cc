// libFuzzer target: a Responses body (/v1/responses) translated and checked as the route
// does before any model work (item references resolve to a fixed item), then rendered
// with a chat template; and the same bytes decoded as a stored response value
// (server/chat/stored_response.h, what Redis may hand back), whose accepted values must
// re-encode to the same bytes. A bad body must end in ApiError (a 4xx naming the field)
// or ChatTemplateError (400 at the HTTP edge); any other exception escapes and libFuzzer
// reports it as a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/api/api_error.h"
#include "server/api/openai_request.h"
#include "server/api/responses_request.h"
#include "server/chat/chat_request.h"
#include "server/chat/conversation.h"
#include "server/chat/stored_response.h"

#include "chat_render_util.h"

namespace {

using namespace pc;
using namespace pc::server;

void decode(const std::string& text) {
  const json body = parse_body(text);
  const ItemLookup lookup = [](const std::string& id) -> std::optional<json> {
    if (id != "fc_1") return std::nullopt;
    return json{{"type", "function_call"}, {"id", "fc_1"}, {"call_id", "call_1"}, {"name", "f"}, {"arguments", "{}"}};
  };
  const ResponsesTranslation t = translate_responses(body, lookup);
  parse_common(t.chat_body, /*chat=*/true);
  parse_reuse(t.chat_body, ReusePolicy{});
  json messages = t.messages;
  if (!t.instructions.empty()) messages.insert(messages.begin(), {{"role", "system"}, {"content", t.instructions}});
  if (messages.empty()) return;
  check_messages({{"messages", messages}});
  check_tools(t.chat_body);
  parse_tool_choice(t.chat_body, ToolFormat::kQwen);
  check_prompt_bytes(messages, 1 << 20, 4096, "input");
  const json flat = parse_tool_arguments(template_messages(messages));
  const json extra = chat_extra(t.chat_body);
  fuzz::render_as_the_route(flat, extra);
}

void decode_value(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  const DecodedStoredResponse d = decode_stored_response("key", bytes, 1000);
  if (d.status != StoredResponseStatus::kOk) return;
  if (d.value.reply)
    for (int32_t id : d.value.reply->ids)
      if (id < 0 || id >= 1000) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_value(data, size);
  try {
    decode(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();  // a bad body is a 4xx
  } catch (const ChatTemplateError&) {
  }
  return 0;
}
