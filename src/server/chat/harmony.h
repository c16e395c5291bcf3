// gpt-oss replies in the harmony format: a sequence of messages, each a header and a
// body, on one of three channels.
//
//   <|channel|>analysis<|message|>THINKING<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Kyoto"}<|call|>
//   <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
//
// (the recipient may also come before the channel: "<|start|>assistant to=functions.f
// <|channel|>commentary json<|message|>"). The generation prompt ends with
// "<|start|>assistant", so the reply begins with its first header. A body ends at
// <|end|>, <|call|> or <|return|> (end-of-generation tokens, not always in the text) or
// where the next header starts (<|start|>, <|channel|>).
//
//   analysis                       → reasoning
//   commentary to=functions.NAME   → a call of NAME, the body its JSON arguments
//   commentary (no recipient)      → content (a preamble the user may see)
//   (a call when calls are off, or whose body is no JSON object → content: its body)
//   final                          → content
//
// Text before any header (a model that does not write harmony) is content. Bodies go
// out as they stream in, less a tail that may start a marker; a call goes out once its
// body has ended, so a streamed reply never carries a call the whole reply would not.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "server/chat/tool_calls.h"

namespace pc::server {

class HarmonyParser {
 public:
  // `calls`: the request offers tools; without, a message to a function is content.
  HarmonyParser(std::function<std::string()> new_id, bool calls);
  ToolParse push(std::string_view text);
  ToolParse finish();

 private:
  enum class Body { kNone, kReasoning, kContent, kCall };
  void advance(bool at_end, ToolParse& out);
  bool read_header(bool at_end);  // false: undecided (needs more text)
  void end_body(ToolParse& out);

  std::function<std::string()> new_id_;
  bool calls_;
  std::string buf_;
  size_t pos_ = 0;            // buf_[0, pos_) is decided
  Body body_ = Body::kNone;   // inside a body of this kind; kNone: at a header (or the start)
  std::string call_name_;     // kCall: the function
  std::string call_args_;     // kCall: the body so far
};

}  // namespace pc::server
