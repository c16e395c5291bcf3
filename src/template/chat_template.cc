#include "template/chat_template.h"

#include <algorithm>

#include "template/jinja_eval.h"
#include "template/jinja_parser.h"

namespace pc {

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {
  try {
    tmpl_ = jinja::parse_template(source_);
  } catch (const ChatTemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw ChatTemplateError("out of memory while parsing the chat template");
  } catch (const std::exception& e) {
    throw ChatTemplateError(std::string("chat template parse error: ") + e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

struct ChatTemplate::Vars {
  std::vector<std::pair<std::string, jinja::Value>> list;
};

namespace {

using jinja::Value;

int32_t add_part(std::vector<TemplatePart>& parts, TemplatePart::Kind kind, int index, int sub) {
  parts.push_back({kind, index, sub});
  return static_cast<int32_t>(parts.size() - 1);
}

// messages as template values, each tagged with its part (see
// apply_with_spans); parts numbers them.
Value tagged_messages(const nlohmann::ordered_json& messages, std::vector<TemplatePart>& parts) {
  if (!messages.is_array()) return jinja::from_json(messages);
  jinja::ValueList list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& m = messages[i];
    const int mi = static_cast<int>(i);
    Value v = jinja::from_json(m, add_part(parts, TemplatePart::Kind::kMessage, mi, -1));
    if (m.is_object()) {
      auto retag = [&](const char* key, TemplatePart::Kind kind) {
        auto it = m.find(key);
        if (it == m.end() || !it->is_array()) return;
        jinja::ValueList items;
        for (size_t j = 0; j < it->size(); ++j)
          items.push_back(jinja::from_json((*it)[j], add_part(parts, kind, mi, static_cast<int>(j))));
        Value l = Value::list(std::move(items));
        l.set_part(v.part());
        v.as_dict().set(key, std::move(l));
      };
      retag("content", TemplatePart::Kind::kContentPart);
      retag("tool_calls", TemplatePart::Kind::kToolCall);
    }
    list.push_back(std::move(v));
  }
  return Value::list(std::move(list));
}

Value tagged_tools(const nlohmann::ordered_json& tools, std::vector<TemplatePart>& parts) {
  if (!tools.is_array()) return jinja::from_json(tools);
  jinja::ValueList list;
  for (size_t i = 0; i < tools.size(); ++i)
    list.push_back(jinja::from_json(tools[i], add_part(parts, TemplatePart::Kind::kTool, static_cast<int>(i), -1)));
  return Value::list(std::move(list));
}

// Where the rendering with the generation prompt starts to differ from the
// one without: the end of the longest run of identical writes.
size_t common_writes(const std::string& a, const std::vector<size_t>& wa, const std::string& b,
                     const std::vector<size_t>& wb) {
  size_t at = 0;
  for (size_t i = 0; i < wa.size() && i < wb.size(); ++i) {
    if (wa[i] != wb[i] || a.compare(at, wa[i] - at, b, at, wb[i] - at) != 0) break;
    at = wa[i];
  }
  return at;
}

}  // namespace

ChatTemplate::Vars ChatTemplate::make_vars(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& extra, std::vector<TemplatePart>* parts) const {
  Vars vars;
  auto& v = vars.list;
  v.emplace_back("bos_token", jinja::Value(bos_token_));
  v.emplace_back("eos_token", jinja::Value(eos_token_));
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (it.key() == "messages" || it.key() == "add_generation_prompt") continue;
      if (parts && it.key() == "tools") v.emplace_back(it.key(), tagged_tools(it.value(), *parts));
      else v.emplace_back(it.key(), jinja::from_json(it.value()));
    }
  } else if (!extra.is_null()) {
    throw ChatTemplateError("extra template variables must be a JSON object");
  }
  v.emplace_back("messages", parts ? tagged_messages(messages, *parts) : jinja::from_json(messages));
  v.emplace_back("add_generation_prompt", jinja::Value(add_generation_prompt));
  return vars;
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra) const {
  Vars vars = make_vars(messages, add_generation_prompt, extra, nullptr);
  jinja::Interp interp;
  return interp.render(*tmpl_, vars.list);
}

RenderedChat ChatTemplate::apply_with_spans(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                            const nlohmann::ordered_json& extra, bool find_generation_prompt) const {
  std::vector<TemplatePart> parts;
  Vars vars = make_vars(messages, add_generation_prompt, extra, &parts);
  std::vector<size_t> writes;
  jinja::Output out = jinja::Interp().render_tracked(*tmpl_, vars.list, &writes);

  // Template text from gen_start on is the generation prompt.
  size_t gen_start = out.text.size();
  if (add_generation_prompt && find_generation_prompt) {
    gen_start = out.runs.empty() ? 0 : out.runs.back().end;
    Vars plain = make_vars(messages, false, extra, nullptr);
    std::vector<size_t> plain_writes;
    try {
      jinja::Output without = jinja::Interp().render_tracked(*tmpl_, plain.list, &plain_writes);
      gen_start = std::max(gen_start, common_writes(out.text, writes, without.text, plain_writes));
    } catch (const ChatTemplateError&) {
      // The template needs the generation prompt: only the data bounds it.
    }
  }

  RenderedChat r;
  r.text = std::move(out.text);
  auto emit = [&](size_t begin, size_t end, TemplatePart part) {
    if (begin >= end) return;
    if (!r.spans.empty() && r.spans.back().part == part && r.spans.back().end == begin) r.spans.back().end = end;
    else r.spans.push_back({begin, end, part});
  };
  auto emit_text = [&](size_t begin, size_t end) {
    const TemplatePart none{}, gen{TemplatePart::Kind::kGenerationPrompt, -1, -1};
    emit(begin, std::min(end, std::max(begin, gen_start)), none);
    emit(std::max(begin, gen_start), end, gen);
  };
  size_t at = 0;
  for (const jinja::Run& run : out.runs) {
    emit_text(at, run.begin);
    emit(run.begin, run.end, parts[static_cast<size_t>(run.part)]);
    at = run.end;
  }
  emit_text(at, r.text.size());

  if (messages.is_array()) {
    for (const auto& m : messages) {
      auto it = m.is_object() ? m.find("role") : m.end();
      r.roles.push_back(m.is_object() && it != m.end() && it->is_string() ? it->get<std::string>() : "");
    }
  }
  return r;
}

}  // namespace pc
