// Role markers from chat templates, the plain fallback, and their tokens with
// real vocabularies.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "pml/encoder.h"
#include "pml/layout.h"
#include "pml/plan.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc::pml {
namespace {

std::string read_template(const std::string& name) {
  return pc::test::read_file(pc::test::shared_dir() + "/templates-2026/" + name + ".jinja");
}

// The text of ids with special tokens spelled out (decode drops them).
std::string spell(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += tok.is_control(id) ? tok.token_text(id) : tok.token_to_piece(id);
  return s;
}

RoleMarkers from(const std::string& name) {
  ChatTemplate t(read_template(name), "<s>", "</s>");
  return RoleMarkers::from_template(t, "<s>", "</s>");
}

TEST(PmlRoleMarkers, ChatMl) {
  const RoleMarkers m = from("Qwen-Qwen2.5-7B-Instruct");
  EXPECT_EQ(m.origin, "chat template");
  EXPECT_EQ(m.system.prefix, "<|im_start|>system\n");  // not the default system prompt
  EXPECT_EQ(m.system.suffix, "<|im_end|>\n");
  EXPECT_EQ(m.user.prefix, "<|im_start|>user\n");
  EXPECT_EQ(m.user.suffix, "<|im_end|>\n");
  EXPECT_EQ(m.assistant.prefix, "<|im_start|>assistant\n");
  EXPECT_EQ(m.assistant.suffix, "<|im_end|>\n");
  EXPECT_EQ(m.generation_prompt, "<|im_start|>assistant\n");
}

TEST(PmlRoleMarkers, FinalAssistantTurnRenderedDifferently) {
  // Qwen3 adds an empty <think> block to a final assistant turn; markers come
  // from a mid-conversation turn.
  const RoleMarkers m = from("Qwen-Qwen3-0.6B");
  EXPECT_EQ(m.assistant.prefix, "<|im_start|>assistant\n");
  EXPECT_EQ(m.user.prefix, "<|im_start|>user\n");
}

TEST(PmlRoleMarkers, EpilogueAndBosAreNotMarkers) {
  const RoleMarkers phi = from("microsoft-Phi-3.5-mini-instruct");  // writes eos_token at the end
  EXPECT_EQ(phi.user.prefix, "<|user|>\n");
  EXPECT_EQ(phi.user.suffix, "<|end|>\n");
  EXPECT_EQ(phi.system.prefix, "<|system|>\n");
  const RoleMarkers llama = from("meta-llama-Llama-3.1-8B-Instruct");
  EXPECT_EQ(llama.user.prefix, "<|start_header_id|>user<|end_header_id|>\n\n");
  EXPECT_EQ(llama.user.suffix, "<|eot_id|>");
  EXPECT_EQ(llama.system.prefix.rfind("<|start_header_id|>system<|end_header_id|>\n\n", 0), 0u);
}

TEST(PmlRoleMarkers, TemplateRejectingSystemUsesUserMarkers) {
  const RoleMarkers g = from("google-gemma-2-2b-it");  // raises on a system message
  EXPECT_EQ(g.origin, "chat template (system as user)");
  EXPECT_EQ(g.system.prefix, "<start_of_turn>user\n");
  EXPECT_EQ(g.assistant.prefix, "<start_of_turn>model\n");
  const RoleMarkers mistral = from("mistralai-Mistral-Nemo-Instruct-2407");  // folds system into a user turn
  EXPECT_EQ(mistral.system.prefix, "[INST]");
  EXPECT_EQ(mistral.user.suffix, "[/INST]");
  EXPECT_EQ(mistral.assistant.suffix, "</s>");
}

TEST(PmlRoleMarkers, PlainFallbackWithoutTemplate) {
  auto f = GgufFile::open(pc::test::shared_dir() + "/models/stories260K.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_EQ(f->find("tokenizer.chat_template"), nullptr);
  const RoleMarkers m = RoleMarkers::for_model(*f, *tok);
  EXPECT_EQ(m.origin, "plain fallback");
  EXPECT_EQ(m.user.prefix, "User: ");
  EXPECT_EQ(m.assistant.prefix, "Assistant: ");
  EXPECT_EQ(m.system.suffix, "\n");
  EXPECT_EQ(m.generation_prompt, "Assistant:");

  // A template that cannot be parsed also falls back.
  EXPECT_EQ(RoleMarkers::from_template_source("{% if %}", *tok).origin, "plain fallback");

  // Layout with an SPM vocabulary: BOS at 0, markers tokenized as text.
  Encoder enc(*tok, m);
  const SchemaLayout L =
      compile_schema("<schema name=\"s\"><user>Once upon a time</user><module name=\"m\">there was</module></schema>", enc);
  ASSERT_FALSE(L.root().tokens.empty());
  EXPECT_EQ(L.root().tokens[0], tok->bos());
  std::vector<int32_t> want{tok->bos()};
  for (const auto& part : {enc.marker("User: "), enc.text("Once upon a time"), enc.marker("\n")})
    want.insert(want.end(), part.begin(), part.end());
  EXPECT_EQ(L.root().tokens, want);
  EXPECT_EQ(L.modules[1].start, static_cast<int32_t>(want.size()));
  EXPECT_EQ(L.modules[1].tokens, enc.text("there was"));
}

TEST(PmlRoleMarkers, Qwen2VocabTemplateTokens) {
  auto f = GgufFile::open(pc::test::shared_dir() + "/vocab/ggml-vocab-qwen2.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  const Encoder enc = Encoder::for_model(*tok, *f);  // the file carries a ChatML template
  EXPECT_EQ(enc.markers().origin, "chat template");
  EXPECT_EQ(enc.markers().user.prefix, "<|im_start|>user\n");
  EXPECT_EQ(enc.bos(), -1);  // Qwen2 adds no BOS

  const SchemaLayout L = compile_schema(
      "<schema name=\"q\"><system>Be brief.</system><module name=\"doc\">Routers route.</module></schema>", enc);
  const std::vector<int32_t> start = tok->encode("<|im_start|>", false, true);
  ASSERT_EQ(start.size(), 1u);  // one special token, not its characters
  EXPECT_EQ(L.root().tokens.front(), start[0]);
  EXPECT_EQ(L.root().positions.front(), 0);
  EXPECT_EQ(spell(*tok, L.root().tokens), "<|im_start|>system\nBe brief.<|im_end|>\n");

  // Text in role tags never becomes special tokens.
  const PromptPlan P = plan_prompt("<prompt schema=\"q\"><doc/><user>say &lt;|im_end|></user><assistant/></prompt>", L, enc);
  ASSERT_EQ(P.items.size(), 3u);
  const std::vector<int32_t>& t = P.items[2].tokens;
  int n_im_end = 0;
  for (int32_t id : t) n_im_end += id == tok->encode("<|im_end|>", false, true)[0];
  EXPECT_EQ(n_im_end, 1);  // only the marker's
  EXPECT_EQ(spell(*tok, t), "<|im_start|>user\nsay <|im_end|><|im_end|>\n<|im_start|>assistant\n");
}

TEST(PmlRoleMarkers, AnyTemplateWithAnyVocab) {
  // A ChatML template applied to the qwen2 vocabulary through from_template_source.
  auto f = GgufFile::open(pc::test::shared_dir() + "/vocab/ggml-vocab-llama-bpe.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  const RoleMarkers m = RoleMarkers::from_template_source(read_template("meta-llama-Llama-3.1-8B-Instruct"), *tok);
  EXPECT_EQ(m.origin, "chat template");
  // The template's {{ bos_token }} is not part of the system prefix: the tokenizer adds BOS.
  EXPECT_EQ(m.system.prefix.rfind("<|start_header_id|>system", 0), 0u);
  Encoder enc(*tok, m);
  const SchemaLayout L = compile_schema("<schema name=\"l\"><user>Hi</user></schema>", enc);
  EXPECT_EQ(L.root().tokens[0], tok->bos());
  EXPECT_EQ(L.root().tokens[1], tok->encode("<|start_header_id|>", false, true)[0]);
}

}  // namespace
}  // namespace pc::pml
