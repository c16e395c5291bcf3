// The promises of ChatTemplate::apply_with_spans (chat_template.h), checked on
// every render of the chat template fuzz targets.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "template/chat_template.h"

namespace pc::fuzz {

// Spans cover the text exactly, none empty, adjacent ones differ in part.
inline void check_spans(const RenderedChat& r) {
  if (r.text.empty()) {
    if (!r.spans.empty()) fail("spans on an empty text");
    return;
  }
  if (r.spans.empty() || r.spans.front().begin != 0) fail("spans do not start at 0");
  for (size_t i = 0; i < r.spans.size(); ++i) {
    const TemplateSpan& s = r.spans[i];
    if (s.begin >= s.end) fail("empty span " + std::to_string(i));
    if (i > 0 && (s.begin != r.spans[i - 1].end || s.part == r.spans[i - 1].part))
      fail("span " + std::to_string(i) + " does not follow its neighbour");
  }
  if (r.spans.back().end != r.text.size()) fail("spans do not end at the text's end");
}

// apply() and apply_with_spans() render the same text (strftime_now reads the
// clock, so a template calling it may differ between two renders). A template
// error must be a ChatTemplateError; anything else escapes to libFuzzer.
inline void render_and_check(const ChatTemplate& t, const nlohmann::json& messages, bool gen,
                             const nlohmann::json& extra) {
  std::string text;
  try {
    text = t.apply(messages, gen, extra);
  } catch (const ChatTemplateError&) {
    return;
  }
  RenderedChat r;
  try {
    r = t.apply_with_spans(messages, gen, extra);
  } catch (const ChatTemplateError& e) {
    fail(std::string("apply() rendered but apply_with_spans() threw: ") + e.what());
  }
  check_spans(r);
  if (r.text != text && t.source().find("strftime_now") == std::string::npos)
    fail("apply() and apply_with_spans() rendered different texts");
}

}  // namespace pc::fuzz
