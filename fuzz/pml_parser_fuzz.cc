// libFuzzer target: a PML schema and a prompt, through parsing, layout,
// planning, the KV plan and describe() — everything a `POST /v1/pml/...` body reaches.
//
// Input: a schema document, optionally followed by a prompt document starting
// at the first "<prompt" (the layout of the seeds in fuzz/corpus/pml_parser/).
// The text before "<prompt" is parsed as a schema and laid out; the rest is
// parsed as a prompt and planned against it. A malformed document must be a
// pc::Error (PmlError); any other exception escapes and libFuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pml/compiled_plan.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"

namespace {

// One token per byte (id = byte + 3), BOS 1 added: cheap, total, and every
// byte of text becomes a position, so lengths follow the input's size.
class ByteTokenizer : public pc::Tokenizer {
 public:
  ByteTokenizer() {
    texts_ = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) texts_.push_back(std::string(1, static_cast<char>(b)));
  }
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> out;
    if (add_special) out.push_back(1);
    for (unsigned char c : text) out.push_back(c + 3);
    return out;
  }
  std::string token_to_piece(int32_t id) const override { return id >= 3 ? texts_.at(id) : ""; }
  int32_t n_vocab() const override { return static_cast<int32_t>(texts_.size()); }
  const std::string& token_text(int32_t id) const override { return texts_.at(id); }
  int32_t bos() const override { return 1; }
  int32_t eos() const override { return 2; }
  bool add_bos() const override { return true; }
  bool is_control(int32_t id) const override { return id < 3; }
  bool is_eog(int32_t id) const override { return id == 2; }

 private:
  std::vector<std::string> texts_;
};

// ChatML-like markers, so role tags produce tokens the way a real model's do.
pc::pml::RoleMarkers markers() {
  pc::pml::RoleMarkers m;
  m.system = {"<|im_start|>system\n", "<|im_end|>\n"};
  m.user = {"<|im_start|>user\n", "<|im_end|>\n"};
  m.assistant = {"<|im_start|>assistant\n", "<|im_end|>\n"};
  m.generation_prompt = "<|im_start|>assistant\n";
  m.origin = "fuzz";
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ByteTokenizer tok;
  static const pc::pml::Encoder enc(tok, markers());
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find("<prompt");
  const std::string_view schema_text = in.substr(0, split);
  const std::string_view prompt_text = split == std::string_view::npos ? std::string_view() : in.substr(split);

  pc::pml::SchemaLayout layout;
  try {
    layout = pc::pml::compile_schema(schema_text, enc, "fuzz.pml");
    (void)pc::pml::describe(layout, &tok);
  } catch (const pc::Error&) {
    // A bad schema is an error value; the prompt is still parsed on its own.
    try {
      (void)pc::pml::parse_prompt(prompt_text, "fuzz-prompt.pml");
    } catch (const pc::Error&) {
    }
    return 0;
  }
  if (prompt_text.empty()) return 0;
  try {
    const pc::pml::PromptPlan plan = pc::pml::plan_prompt(prompt_text, layout, enc, "fuzz-prompt.pml");
    (void)pc::pml::describe(plan, layout, &tok);
    (void)pc::pml::kv_plan(plan, layout);
  } catch (const pc::Error&) {
  }
  return 0;
}
