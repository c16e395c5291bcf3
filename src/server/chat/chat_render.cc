#include "server/chat/chat_render.h"

#include <algorithm>
#include <optional>
#include <string>

#include "server/api/api_error.h"
#include "server/chat/conversation.h"

namespace pc::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // what the template gets: the request's key order

namespace {

std::optional<bool> optional_bool(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw bad_field(name, std::string("'") + name + "' must be a boolean", "invalid_type");
  return it->get<bool>();
}

template <class J>
bool last_is_assistant(const J& messages) {
  return messages.is_array() && !messages.empty() && messages.back().is_object() &&
         messages.back().value("role", "") == "assistant";
}

RenderedChat render_once(const ChatTemplate& tmpl, const ojson& messages, const ojson& extra, bool agp, bool spans) {
  if (spans) return tmpl.apply_with_spans(messages, agp, extra, /*find_generation_prompt=*/false);
  RenderedChat r;
  r.text = tmpl.apply(messages, agp, extra);
  return r;
}

RenderedChat render_or_retry(const ChatTemplate& tmpl, const ojson& messages, const ojson& extra, bool agp,
                             bool spans) {
  try {
    return render_once(tmpl, messages, extra, agp, spans);
  } catch (const ChatTemplateError&) {
    const std::optional<ojson> fixed = tool_call_content_as_empty(messages);
    if (!fixed) throw;
    return render_once(tmpl, *fixed, extra, agp, spans);
  }
}

// text[0, end) and the spans over it.
void cut(RenderedChat& r, size_t end) {
  r.text.resize(end);
  while (!r.spans.empty() && r.spans.back().begin >= end) r.spans.pop_back();
  if (!r.spans.empty()) r.spans.back().end = std::min(r.spans.back().end, end);
}

}  // namespace

ChatRender parse_chat_render(const json& body, const json& messages) {
  ChatRender m;
  const std::optional<bool> cont = optional_bool(body, "continue_final_message");
  const std::optional<bool> agp = optional_bool(body, "add_generation_prompt");
  m.continue_final = cont.value_or(false);
  if (m.continue_final && agp.value_or(false))
    throw bad_field("continue_final_message",
                    "'continue_final_message' and 'add_generation_prompt' cannot both be true: a continued "
                    "message has no generation prompt after it");
  if (m.continue_final && !last_is_assistant(messages))
    throw bad_field("continue_final_message",
                    "'continue_final_message' needs the last message to be an assistant message");
  m.add_generation_prompt = agp.value_or(!m.continue_final);
  return m;
}

RenderedChat render_chat(const ChatTemplate& tmpl, const ojson& messages, const ojson& extra, ChatRender mode,
                         bool spans) {
  if (!mode.continue_final || !last_is_assistant(messages))
    return render_or_retry(tmpl, messages, extra, mode.add_generation_prompt, spans);
  const ojson content = messages.back().contains("content") ? messages.back()["content"] : ojson();
  const std::string text = content.is_string() ? content.get<std::string>() : "";
  if (text.empty()) {
    // Nothing to continue: the assistant's turn opened by the generation prompt.
    ojson before = messages;
    before.erase(before.size() - 1);
    return render_or_retry(tmpl, before, extra, /*agp=*/true, spans);
  }
  RenderedChat r = render_or_retry(tmpl, messages, extra, /*agp=*/false, spans);
  const size_t at = r.text.rfind(text);
  if (at == std::string::npos)
    throw bad_field("continue_final_message",
                    "the chat template does not render the final assistant message's content as sent, so it "
                    "cannot be continued");
  cut(r, at + text.size());
  return r;
}

}  // namespace pc::server
