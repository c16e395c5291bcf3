#include "template/chat_template.h"

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

std::string ChatTemplate::apply(const nlohmann::json& messages, bool add_generation_prompt,
                                const nlohmann::json& extra) const {
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("bos_token", jinja::Value(bos_token_));
  vars.emplace_back("eos_token", jinja::Value(eos_token_));
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (it.key() == "messages" || it.key() == "add_generation_prompt") continue;
      vars.emplace_back(it.key(), jinja::from_json(it.value()));
    }
  } else if (!extra.is_null()) {
    throw ChatTemplateError("extra template variables must be a JSON object");
  }
  vars.emplace_back("messages", jinja::from_json(messages));
  vars.emplace_back("add_generation_prompt", jinja::Value(add_generation_prompt));
  jinja::Interp interp;
  return interp.render(*tmpl_, vars);
}

}  // namespace pc
