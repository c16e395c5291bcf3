// Chat templates: a Jinja2 subset interpreter matching what Hugging Face's
// apply_chat_template renders (Python Jinja2 3.1, sandboxed, trim_blocks and
// lstrip_blocks on, loopcontrols, tojson keeping non-ASCII, raise_exception,
// strftime_now).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace pc {

// Syntax errors (what() carries "line L, column C: ..."), runtime errors of the
// template, and raise_exception(msg) (what() is exactly msg, line() == 0).
struct ChatTemplateError : std::runtime_error {
  explicit ChatTemplateError(const std::string& msg, int line = 0, int column = 0)
      : std::runtime_error(msg), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_;
  int column_;
};

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parses the template once; throws ChatTemplateError with line and column on
  // syntax errors.
  explicit ChatTemplate(std::string source, std::string bos_token = "<s>",
                        std::string eos_token = "</s>");
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: JSON array of {role, content, ...}. extra: additional variables
  // (tools, enable_thinking, ...). Throws ChatTemplateError; when the template
  // calls raise_exception(msg), what() is exactly msg.
  std::string apply(const nlohmann::json& messages, bool add_generation_prompt,
                    const nlohmann::json& extra = nlohmann::json::object()) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace pc
