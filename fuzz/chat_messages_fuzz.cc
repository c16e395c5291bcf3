// libFuzzer target: the request side of chat templates — messages, tools and
// flags as a client sends them — rendered by the real templates in
// ../shared/templates-2026. The server passes request JSON to the template, so
// any JSON must render or be a ChatTemplateError (the template's own
// raise_exception included), never a crash or another exception.
//
// Input: a JSON object {"template": N, "messages": [...], "add_generation_prompt":
// bool, ...}; N picks the template (index into the sorted file list, modulo its
// size; default 0); every other key but "messages" and "add_generation_prompt"
// is passed as an extra variable (tools, enable_thinking, ...). Input that is
// not a JSON object is skipped. Seeds: fuzz/corpus/chat_messages/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template_invariants.h"
#include "fuzz_util.h"
#include "template/chat_template.h"

namespace {

const std::vector<std::unique_ptr<pc::ChatTemplate>>& templates() {
  static const auto all = [] {
    std::vector<std::unique_ptr<pc::ChatTemplate>> v;
    for (const auto& p : pc::fuzz::shared_templates())
      v.push_back(std::make_unique<pc::ChatTemplate>(pc::fuzz::read_file(p), "<s>", "</s>"));
    return v;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json req = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!req.is_object()) return 0;
  const auto& ts = templates();
  size_t index = 0;
  if (auto it = req.find("template"); it != req.end() && it->is_number_unsigned()) index = it->get<uint64_t>() % ts.size();
  const nlohmann::json messages = req.value("messages", nlohmann::json::array());
  const bool gen = req.value("add_generation_prompt", nlohmann::json(false)).is_boolean() &&
                   req.value("add_generation_prompt", nlohmann::json(false)).get<bool>();
  nlohmann::json extra = nlohmann::json::object();
  for (auto it = req.begin(); it != req.end(); ++it)
    if (it.key() != "template" && it.key() != "messages" && it.key() != "add_generation_prompt") extra[it.key()] = it.value();
  pc::fuzz::render_and_check(*ts[index], messages, gen, extra);
  return 0;
}
