#include "template/builtin_templates.h"

#include <map>

namespace pc {

namespace {

// ChatML as Qwen and many fine-tunes use it. Renders roles and string contents only
// (no tools block): a model without a template of its own was not trained on one.
const char* const kChatMl =
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

const std::map<std::string, std::string, std::less<>>& templates() {
  static const std::map<std::string, std::string, std::less<>> t = {{"chatml", kChatMl}};
  return t;
}

}  // namespace

const std::string* builtin_chat_template(std::string_view name) {
  auto it = templates().find(name);
  return it == templates().end() ? nullptr : &it->second;
}

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> names;
  for (const auto& [name, source] : templates()) names.push_back(name);
  return names;
}

}  // namespace pc
