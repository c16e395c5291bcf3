// Chat templates built into the binary, by name (`serve --chat-template NAME`): the
// explicit fallback for a model whose GGUF carries no tokenizer.chat_template.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace pc {

// The Jinja source of the built-in template `name`; nullptr when there is none.
const std::string* builtin_chat_template(std::string_view name);

// Every built-in name, sorted ("chatml", ...).
std::vector<std::string> builtin_chat_template_names();

}  // namespace pc
