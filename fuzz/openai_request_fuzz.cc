// libFuzzer target: an OpenAI request body (/v1/chat/completions or /v1/completions)
// decoded as the routes do before any model work, and a chat request rendered with a
// chat template into request parts. The first input byte picks the route and the
// template's tool-call format; the rest is the body.
//
// A bad body must end in ApiError (400, naming the field) or ChatTemplateError (400 at
// the HTTP edge); any other exception is a 500 there, so it escapes here and libFuzzer
// reports it as a crash.
#include <cstdint>
#include <string>

#include "server/api/api_error.h"
#include "server/chat/chat_request.h"
#include "server/chat/conversation.h"
#include "server/api/lifetime.h"
#include "server/api/openai_request.h"
#include "server/chat/request_structure.h"

#include "chat_render_util.h"

namespace {

using namespace pc;
using namespace pc::server;

// What prepare_chat does up to tokenization: render, then lay out the request's parts
// over the text (one token per byte stands in for the tokenizer).
void render(const json& messages, const json& extra) {
  const json flat = parse_tool_arguments(template_messages(messages));
  const std::optional<RenderedChat> rendered = fuzz::render_as_the_route(flat, extra);
  if (!rendered) return;
  const RenderedChat& r = *rendered;
  std::vector<int64_t> offsets;
  for (size_t i = 0; i <= r.text.size(); ++i) offsets.push_back(int64_t(i));
  std::vector<PartSpan> spans;
  for (const TemplateSpan& s : r.spans)
    spans.push_back({s.begin, s.end, s.part.kind == TemplatePart::Kind::kNone ? -1 : 1, s.part.index, s.part.sub});
  auto tools = extra.find("tools");
  std::vector<RequestPart> parts = request_parts(spans, messages, tools != extra.end() ? *tools : json(), offsets);
  split_content_parts(parts, messages, r.text, offsets);
  blocks_of(parts);
}

void decode(bool chat, ToolFormat format, const std::string& text) {
  const json body = parse_body(text);
  parse_common(body, chat);
  parse_reuse(body, ReusePolicy{});
  openai_retention_seconds(body);
  if (!chat) return;
  check_messages(body);
  check_tools(body);
  parse_tool_choice(body, format);
  render(body["messages"], chat_extra(body));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) == 0;
  const ToolFormat format = (data[0] & 2) ? ToolFormat::kQwen : ToolFormat::kNone;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    decode(chat, format, text);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();  // a bad body is a 4xx
  } catch (const ChatTemplateError&) {
  }
  return 0;
}
