// A reply's reasoning ("thinking") told apart from its answer, for templates whose
// models think in tags before answering:
//
//   Qwen3, Qwen3.5, SmolLM3, DeepSeek-R1-Distill:   <think>\n THOUGHTS \n</think>\n\n ANSWER
//
// The reply may open the block itself, or the prompt may have opened it already
// (DeepSeek-R1's generation prompt ends with "<think>\n"): then the reply starts inside
// it. With a format that splits (deepseek, auto), THOUGHTS (trimmed) is the reasoning
// and ANSWER (leading whitespace dropped) the content; a block that never closes is all
// reasoning. A reply that does not start with the open tag (after whitespace) is all
// content. With none, nothing is split.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace pc::server {

// llama-server's --reasoning-format / per-request reasoning_format values we serve:
//   none      thinking stays in the content, tags and all
//   deepseek  thinking goes to reasoning_content (Anthropic: thinking blocks)
//   auto      the same as deepseek for the templates this server recognises (default)
enum class ReasoningFormat { kNone, kDeepSeek, kAuto };
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);
const char* reasoning_format_name(ReasoningFormat f);

// The tags a template's model thinks in; empty when the template shows no thinking.
struct ThinkTags {
  std::string open, close;
  bool empty() const { return open.empty(); }
};
ThinkTags detect_think_tags(std::string_view template_source);

// True when the prompt leaves a thinking block open (its last open tag comes after its
// last close tag): the reply starts inside it.
bool prompt_opens_thinking(const ThinkTags& tags, std::string_view prompt);

// Reasoning and content decided so far (push) or at the end (finish).
struct ReasoningSplit {
  std::string reasoning;
  std::string content;
};

// Incremental splitter over one reply: text that may still be part of a tag, or
// whitespace whose place (inside the reasoning or before the answer) is undecided,
// is held until decided, so the pieces reassemble to the split of the whole reply.
class ReasoningParser {
 public:
  ReasoningParser(ThinkTags tags, bool starts_inside);
  ReasoningSplit push(std::string_view text);
  ReasoningSplit finish();
  // A stream's step: push(text), and when `done` the finish() that follows it too.
  ReasoningSplit next(std::string_view text, bool done);

 private:
  enum class State { kStart, kInside, kAfter, kContent };
  void step(ReasoningSplit& out, bool end);

  ThinkTags tags_;
  State state_;
  bool reasoning_started_ = false;  // non-whitespace reasoning emitted
  std::string buf_;                 // undecided text
};

// The whole reply split at once (the parser fed the whole text).
ReasoningSplit split_reasoning(const ThinkTags& tags, bool starts_inside, std::string_view text);

}  // namespace pc::server
