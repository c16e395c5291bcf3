// The reasoning splitter (server/chat/reasoning.h): whole replies, the same replies fed a
// few bytes at a time (cutting the tags apart), a block the prompt opened, a block that
// never closes, and the tags each template's model thinks in.
#include <gtest/gtest.h>

#include "server/chat/reasoning.h"
#include "test_util.h"

namespace pc::test {
namespace {

using server::ReasoningSplit;
using server::ThinkTags;

const ThinkTags kThink{"<think>", "</think>"};

ReasoningSplit streamed(const std::string& text, bool open, size_t step) {
  server::ReasoningParser p(kThink, open);
  ReasoningSplit all;
  for (size_t i = 0; i < text.size(); i += step) {
    const ReasoningSplit d = p.push(std::string_view(text).substr(i, step));
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  const ReasoningSplit d = p.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

// Whole and streamed 1..9 bytes at a time give the same split.
void expect_split(const std::string& text, bool open, const std::string& reasoning, const std::string& content) {
  const ReasoningSplit w = server::split_reasoning(kThink, open, text);
  EXPECT_EQ(w.reasoning, reasoning) << text;
  EXPECT_EQ(w.content, content) << text;
  for (size_t step = 1; step < 10; ++step) {
    const ReasoningSplit s = streamed(text, open, step);
    EXPECT_EQ(s.reasoning, reasoning) << text << " step " << step;
    EXPECT_EQ(s.content, content) << text << " step " << step;
  }
}

TEST(Reasoning, QwenStyleBlockThenAnswer) {
  expect_split("<think>\nLet me see.\nIt is 4.\n</think>\n\nThe answer is 4.", false,
               "Let me see.\nIt is 4.", "The answer is 4.");
  expect_split("  <think>x</think>y", false, "x", "y");
  // An empty block (Qwen3 with thinking off writes none; a model may write one).
  expect_split("<think>\n\n</think>\n\nHi", false, "", "Hi");
}

TEST(Reasoning, NoBlockIsAllContent) {
  expect_split("Hello <think>not at the start</think>", false, "", "Hello <think>not at the start</think>");
  expect_split("\n<thin", false, "", "\n<thin");  // a partial tag at the end is text
  expect_split("", false, "", "");
}

TEST(Reasoning, PromptOpenedTheBlock) {
  // DeepSeek-R1's generation prompt ends with "<think>\n": the reply starts inside.
  expect_split("Hmm, 2+2.\n</think>\n\n4", true, "Hmm, 2+2.", "4");
  // A block that never closes (cut by max_tokens) is all reasoning.
  expect_split("still thinking about </thi", true, "still thinking about </thi", "");
  expect_split("<think>thinking", false, "thinking", "");
}

TEST(Reasoning, TextThatLooksLikeATagInside) {
  expect_split("<think>a < b and </thinking> is not the tag</think>done", false,
               "a < b and </thinking> is not the tag", "done");
}

TEST(Reasoning, PromptOpensThinking) {
  EXPECT_TRUE(server::prompt_opens_thinking(kThink, "<｜Assistant｜><think>\n"));
  EXPECT_FALSE(server::prompt_opens_thinking(kThink, "<｜Assistant｜><think>\n</think>"));
  EXPECT_FALSE(server::prompt_opens_thinking(kThink, "<think>a</think>b<|im_start|>assistant\n"));
  EXPECT_FALSE(server::prompt_opens_thinking(kThink, "<|im_start|>assistant\n"));
  EXPECT_FALSE(server::prompt_opens_thinking(ThinkTags{}, "<think>"));
}

std::string read(const std::string& rel) { return read_file(shared_dir() + "/" + rel); }

TEST(Reasoning, TemplatesThatThink) {
  for (const char* t : {"templates-2026/Qwen-Qwen3-0.6B.jinja", "templates-2026/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                        "templates-2026/Qwen-Qwen3.5-4B.jinja"}) {
    const std::string src = read(t);
    ASSERT_FALSE(src.empty()) << t;
    EXPECT_EQ(server::detect_think_tags(src).open, "<think>") << t;
  }
  for (const char* t : {"templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja", "templates-2026/meta-llama-Llama-3.1-8B-Instruct.jinja"})
    EXPECT_TRUE(server::detect_think_tags(read(t)).empty()) << t;
}

TEST(Reasoning, FormatNames) {
  EXPECT_EQ(server::parse_reasoning_format("none"), server::ReasoningFormat::kNone);
  EXPECT_EQ(server::parse_reasoning_format("deepseek"), server::ReasoningFormat::kDeepSeek);
  EXPECT_EQ(server::parse_reasoning_format("auto"), server::ReasoningFormat::kAuto);
  EXPECT_FALSE(server::parse_reasoning_format("deepseek-legacy"));
}

}  // namespace
}  // namespace pc::test
