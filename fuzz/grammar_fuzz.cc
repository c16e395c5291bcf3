// libFuzzer target: a request's grammar — GBNF text, or a JSON Schema when the input
// starts with '{' — through parsing, the checks, compilation and a walk of the
// matcher over a small byte vocabulary. Bad input must be a GrammarError; anything
// else escapes and libFuzzer reports it. The walk takes the allowed token the input's
// bytes pick at each step, so masks and transitions are exercised on the input's own
// grammar.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "grammar/response_format.h"

namespace {

std::shared_ptr<const pc::grammar::TokenTrie> trie() {
  static const auto t = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    for (const char* p : {"{\"", "\": ", "\", \"", "true", "null", "12", "ab", "\xc3\xa9"}) pieces.push_back(p);
    pieces.push_back("");  // EOS
    const int32_t eos = int32_t(pieces.size()) - 1;
    return std::make_shared<pc::grammar::TokenTrie>(pieces, std::vector<int32_t>{eos});
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const pc::grammar::Grammar> g;
  try {
    if (!text.empty() && text[0] == '{') {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      g = pc::grammar::from_json_schema(schema);
    } else {
      g = pc::grammar::from_gbnf(text);
    }
  } catch (const pc::grammar::GrammarError&) {
    return 0;
  }
  pc::grammar::Matcher m(std::make_shared<pc::grammar::Automaton>(g, trie()));
  for (size_t step = 0; step < 64 && !m.finished(); ++step) {
    const auto& mask = m.allowed();
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < trie()->n_vocab(); ++id)
      if (pc::grammar::allows(mask, id)) ids.push_back(id);
    if (ids.empty()) break;
    const int32_t id = ids[(size ? data[step % size] : 0) % ids.size()];
    if (!m.accept(id)) __builtin_trap();  // the mask allowed it
  }
  return 0;
}
