// Chat templates: a Jinja2 subset interpreter matching what Hugging Face's
// apply_chat_template renders (Python Jinja2 3.1, sandboxed, trim_blocks and
// lstrip_blocks on, loopcontrols, tojson keeping non-ASCII, raise_exception,
// strftime_now).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// The part of a chat request a byte of the rendered text came from.
struct TemplatePart {
  enum class Kind : uint8_t {
    kNone,              // template text: markers, default prompts, separators
    kTool,              // tools[index]
    kMessage,           // messages[index] (any role: system, user, assistant, tool)
    kContentPart,       // messages[index].content[sub] (content given as a list)
    kToolCall,          // messages[index].tool_calls[sub]
    kGenerationPrompt,  // template text there only because add_generation_prompt is true
  };
  Kind kind = Kind::kNone;
  int index = -1;
  int sub = -1;

  bool operator==(const TemplatePart& o) const { return kind == o.kind && index == o.index && sub == o.sub; }
  bool operator!=(const TemplatePart& o) const { return !(*this == o); }
};

// Bytes [begin, end) of RenderedChat::text came from `part`.
struct TemplateSpan {
  size_t begin;
  size_t end;
  TemplatePart part;
};

struct RenderedChat {
  std::string text;  // == ChatTemplate::apply() of the same request
  // Cover text exactly: spans[0].begin == 0, each span ends where the next
  // begins, the last ends at text.size(); no span is empty and adjacent
  // spans differ in part. Empty when text is.
  std::vector<TemplateSpan> spans;
  // messages[i].role ("" when absent or not a string), one per message.
  std::vector<std::string> roles;
};

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
  // (tools, enable_thinking, ...). Objects keep their key order (what `tojson`
  // writes, as Jinja2 does for a Python dict); a nlohmann::json converts
  // implicitly, with its keys sorted. Throws ChatTemplateError; when the template
  // calls raise_exception(msg), what() is exactly msg.
  std::string apply(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // apply() that also says, for every byte of the text, the part of the
  // request it came from. The spans follow the data, not the template's
  // control flow: a message the template moves (into a tools block, after
  // the tools, ...) keeps its index. Rules (docs/templates.md):
  //  - strings inside messages[i] (content, role, name, reasoning...) belong
  //    to message i, except those inside content[j] (when content is a list)
  //    and tool_calls[k], which belong to that content part / tool call;
  //    strings inside tools[i] belong to tool i. The parts survive the
  //    template's string operations (see jinja::Interp::inherit); bytes a
  //    filter rewrites (tojson escaping, repr quotes) keep the part of the
  //    value they encode.
  //  - template text is kNone, except: when add_generation_prompt is true,
  //    the template text written after both the last byte of data and the
  //    point where the rendering without add_generation_prompt stops writing
  //    the same thing (compared write by write) is kGenerationPrompt. This
  //    renders the request a second time.
  // Costs about 2x-3x apply() (measured in spans_test).
  // find_generation_prompt = false: the generation prompt's bytes stay template text
  // (kNone), saving the second render that tells them apart.
  RenderedChat apply_with_spans(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                                bool find_generation_prompt = true) const;

  const std::string& source() const { return source_; }

 private:
  struct Vars;
  Vars make_vars(const nlohmann::ordered_json& messages, bool add_generation_prompt, const nlohmann::ordered_json& extra,
                 std::vector<TemplatePart>* parts) const;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace pc
