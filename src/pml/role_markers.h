// The text a role tag becomes: <user>Hi</user> → user.prefix + "Hi" + user.suffix.
//
// Derived from the model's chat template by rendering probe conversations whose
// message contents are sentinel characters and taking the differences:
//
//   render([user ␁])                        = P
//   render([user ␁, assistant ␂, user ␃])   = P + assistant.prefix ␂ assistant.suffix
//                                                  user.prefix ␃ user.suffix
//   render([user ␁, assistant ␂])           = ... ␂ assistant.suffix
//   render([system ␄, user ␁])              = BOS system.prefix ␄ system.suffix user.prefix ␁ ...
//   render([user ␁], add_generation_prompt) = P + generation_prompt
//
// so a template's default system prompt or leading BOS text never ends up in a
// marker. A template that rejects system messages (Gemma) or folds them into the
// user turn (Mistral) gets system = user markers. Markers may contain special
// tokens' text ("<|im_start|>"); they are tokenized with special-token parsing,
// the text between them without.
#pragma once
#include <string>
#include <string_view>

#include "pml/document.h"

namespace pc {
class ChatTemplate;
class GgufFile;
class Tokenizer;
}  // namespace pc

namespace pc::pml {

struct RoleMarker {
  std::string prefix;  // before the message text
  std::string suffix;  // after it
};

struct RoleMarkers {
  RoleMarker system, user, assistant;
  // What opens an assistant turn for the model to write (an empty <assistant/>).
  std::string generation_prompt;
  // "chat template", "chat template (system as user)" or "plain fallback".
  std::string origin;

  const RoleMarker& operator[](Role r) const;

  // "System: ", "User: ", "Assistant: " prefixes, "\n" suffixes; generation
  // prompt "Assistant:".
  static RoleMarkers plain();
  // From a chat template. bos_text / eos_text: what the template was given as
  // bos_token / eos_token. BOS text is dropped from the start of the system
  // prefix (the tokenizer adds BOS itself); EOS text that ends every rendering
  // is an epilogue, not part of a marker. Throws pc::Error when the template
  // cannot be probed (it fails on plain user/assistant turns, or they do not
  // extend each other).
  static RoleMarkers from_template(const ChatTemplate& tmpl, std::string_view bos_text = "",
                                   std::string_view eos_text = "");
  // From tokenizer.chat_template in `f` (rendered with the tokenizer's BOS/EOS
  // text); plain() when the file has none or it cannot be probed.
  static RoleMarkers for_model(const GgufFile& f, const Tokenizer& tok);
  // Same, from template source text ("" → plain()).
  static RoleMarkers from_template_source(const std::string& source, const Tokenizer& tok);
};

}  // namespace pc::pml
