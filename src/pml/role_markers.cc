#include "pml/role_markers.h"

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pc::pml {

namespace {

using nlohmann::json;

// Sentinels: control characters no template produces on its own and none trims.
constexpr char kUser1 = '\x01', kAsst = '\x02', kUser2 = '\x03', kSys = '\x04';

json msg(const char* role, char content) { return {{"role", role}, {"content", std::string(1, content)}}; }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// `longer` must extend `shorter`; returns the added text.
bool delta(const std::string& shorter, const std::string& longer, std::string* out) {
  if (longer.size() < shorter.size() || longer.compare(0, shorter.size(), shorter) != 0) return false;
  *out = longer.substr(shorter.size());
  return true;
}

}  // namespace

const RoleMarker& RoleMarkers::operator[](Role r) const {
  switch (r) {
    case Role::kSystem: return system;
    case Role::kUser: return user;
    case Role::kAssistant: return assistant;
  }
  return user;
}

RoleMarkers RoleMarkers::plain() {
  RoleMarkers m;
  m.system = {"System: ", "\n"};
  m.user = {"User: ", "\n"};
  m.assistant = {"Assistant: ", "\n"};
  m.generation_prompt = "Assistant:";
  m.origin = "plain fallback";
  return m;
}

RoleMarkers RoleMarkers::from_template(const ChatTemplate& t, std::string_view bos_text,
                                       std::string_view eos_text) {
  RoleMarkers m;
  m.origin = "chat template";
  std::string p1, p2, p3, g;
  try {
    p1 = t.apply(json::array({msg("user", kUser1)}), false);
    p2 = t.apply(json::array({msg("user", kUser1), msg("assistant", kAsst)}), false);
    p3 = t.apply(json::array({msg("user", kUser1), msg("assistant", kAsst), msg("user", kUser2)}), false);
    g = t.apply(json::array({msg("user", kUser1)}), true);
  } catch (const ChatTemplateError& e) {
    throw Error(std::string("chat template fails on a plain conversation: ") + e.what());
  }
  // Epilogue: text a template writes after the last message when no generation
  // prompt is asked for (Phi-3.5 writes eos_token). Only EOS text ending every
  // rendering counts, so an assistant suffix "</s>" (Mistral) stays.
  if (!eos_text.empty() && ends_with(p1, eos_text) && ends_with(p2, eos_text) && ends_with(p3, eos_text)) {
    for (std::string* s : {&p1, &p2, &p3}) s->resize(s->size() - eos_text.size());
  }
  // p3 = p1 + assistant.prefix ␂ assistant.suffix user.prefix ␃ user.suffix.
  // The assistant turn is taken from the middle of the conversation: templates
  // such as Qwen3's render a final assistant turn differently.
  std::string d;
  if (!delta(p1, p3, &d)) throw Error("chat template: later turns do not extend the first user turn");
  const size_t a = d.find(kAsst), u = d.find(kUser2);
  if (a == std::string::npos || u == std::string::npos || a > u || d.find(kAsst, a + 1) != std::string::npos ||
      d.find(kUser2, u + 1) != std::string::npos)
    throw Error("chat template: message contents do not appear once each in the rendering");
  m.assistant.prefix = d.substr(0, a);
  m.user.suffix = d.substr(u + 1);
  const std::string middle = d.substr(a + 1, u - a - 1);  // assistant.suffix + user.prefix
  // assistant.suffix: what follows a final assistant turn (p2 after ␂).
  const size_t a2 = p2.find(kAsst);
  if (a2 == std::string::npos) throw Error("chat template: assistant content missing from the rendering");
  m.assistant.suffix = p2.substr(a2 + 1);
  if (!starts_with(middle, m.assistant.suffix))
    throw Error("chat template: cannot tell the assistant turn's end from the user turn's start");
  m.user.prefix = middle.substr(m.assistant.suffix.size());
  if (!delta(p1, g, &m.generation_prompt) || m.generation_prompt.empty()) m.generation_prompt = m.assistant.prefix;

  // System: [system ␄, user ␁] = preamble system.prefix ␄ system.suffix user.prefix ␁ ...
  // The only preamble dropped is the BOS text (the tokenizer adds BOS itself).
  bool system_ok = false;
  try {
    const std::string s = t.apply(json::array({msg("system", kSys), msg("user", kUser1)}), false);
    const size_t x = s.find(kSys), y = s.find(kUser1);
    if (x != std::string::npos && y != std::string::npos && x < y) {
      const std::string between = s.substr(x + 1, y - x - 1);
      if (ends_with(between, m.user.prefix)) {
        m.system.suffix = between.substr(0, between.size() - m.user.prefix.size());
        m.system.prefix = s.substr(0, x);
        if (!bos_text.empty() && starts_with(m.system.prefix, bos_text)) m.system.prefix.erase(0, bos_text.size());
        system_ok = true;
      }
    }
  } catch (const ChatTemplateError&) {
    // The template rejects the system role (Gemma): system = user below.
  }
  if (!system_ok) {
    m.system = m.user;
    m.origin = "chat template (system as user)";
  }
  return m;
}

RoleMarkers RoleMarkers::from_template_source(const std::string& source, const Tokenizer& tok) {
  if (source.empty()) return plain();
  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  try {
    ChatTemplate t(source, bos, eos);
    return from_template(t, bos, eos);
  } catch (const Error&) {
    return plain();
  } catch (const ChatTemplateError&) {
    return plain();
  }
}

RoleMarkers RoleMarkers::for_model(const GgufFile& f, const Tokenizer& tok) {
  return from_template_source(f.get_string("tokenizer.chat_template", ""), tok);
}

}  // namespace pc::pml
