// Blocks of chat requests: for every template in ../shared/templates and requests with
// tools, tool calls, tool results and reasoning, each part's block is made of the very
// token ids the server computes for the prompt, and those ids spell exactly the bytes
// the template spans give the part.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "server/chat/conversation.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {
namespace {

using json = nlohmann::json;

std::vector<std::pair<std::string, json>> requests() {
  const json tools = json::array(
      {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"description", "Weather for a city"},
                                            {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}, {"description", "The time in a city"},
                                            {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
  std::vector<std::pair<std::string, json>> out;
  out.push_back({"chat", {{"messages", json::array({{{"role", "system"}, {"content", "You are terse."}},
                                                    {{"role", "user"}, {"content", "What is 2+2?"}},
                                                    {{"role", "assistant"}, {"content", "4."}},
                                                    {{"role", "user"}, {"content", "And times three?"}}})}}});
  out.push_back({"tools", {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                           {"tools", tools}}});
  out.push_back({"tool_round_trip",
                 {{"messages",
                   json::array({{{"role", "user"}, {"content", "Weather in Paris?"}},
                                {{"role", "assistant"}, {"content", ""},
                                 {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}})}},
                                {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny, 21 C"}},
                                {{"role", "user"}, {"content", "Thanks!"}}})},
                  {"tools", tools}}});
  out.push_back({"reasoning", {{"messages", json::array({{{"role", "user"}, {"content", "Is 17 prime?"}},
                                                         {{"role", "assistant"}, {"content", "<think>\nCheck.\n</think>\n\nYes."}},
                                                         {{"role", "user"}, {"content", "Is 21?"}}})}}});
  return out;
}

TEST(ChatBlocks, BlockTokensSpellTheirPartForEveryTemplate) {
  const std::string dir = test::shared_dir() + "/templates";
  for (const char* vocab : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-qwen2.gguf", "models/stories260K.gguf"}) {
    auto f = GgufFile::open(test::shared_dir() + "/" + vocab);
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*f);
    int templates = 0;
    int64_t total = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() != ".jinja") continue;
      ++templates;
      const ChatTemplate tmpl(test::read_file(e.path().string()));
      int64_t blocks = 0;
      for (const auto& [name, req] : requests()) {
        SCOPED_TRACE(std::string(vocab) + " " + e.path().filename().string() + " " + name);
        ConversationMemory memory;
        json extra = json::object();
        if (req.contains("tools")) extra["tools"] = req["tools"];
        ChatPrompt p;
        try {
          p = build_chat_prompt(tmpl, *tok, memory, "", req["messages"], extra);
        } catch (const ChatTemplateError&) {
          continue;  // the template refuses this request (e.g. no system role)
        }
        std::string pieces;
        for (int32_t id : p.ids) pieces += "[" + tok->token_to_piece(id) + "|" + tok->token_text(id) + "]";
        ASSERT_EQ(p.token_offsets.size(), p.ids.size() + 1) << "the ids spell the rendered text:\n" << p.text << "\n" << pieces;
        EXPECT_EQ(p.token_offsets.back(), int64_t(p.text.size()));
        const bool native = std::string(vocab).find("qwen2") != std::string::npos &&
                            e.path().filename().string().find("Qwen2.5") != std::string::npos;
        for (const RequestPart& part : p.parts) {
          // With the vocabulary the template was written for (its markers are special
          // tokens), every message with text is a whole block. Qwen2.5's tool definitions
          // are not: "}\n" after each one's JSON is one token, so that last token is left
          // out of the tool's block.
          const json& msgs = req["messages"];
          const bool has_text = part.kind == RequestPart::Kind::kMessage && msgs[part.index]["content"].is_string() &&
                                !msgs[part.index]["content"].get<std::string>().empty();
          if (native && has_text) { EXPECT_TRUE(part.whole_block) << "part " << part.index << " of " << name; }
          if (!part.is_block) continue;
          ++blocks;
          // The block's tokens lie inside the part's bytes and spell them from their first
          // byte on; a whole block spells all of them. Each token spells its piece; a
          // special token parsed from the text (or a piece the vocabulary prints otherwise,
          // like SentencePiece's ▁) its vocabulary text.
          const int64_t b0 = p.token_offsets[part.block_begin], b1 = p.token_offsets[part.block_end];
          EXPECT_LE(int64_t(part.byte_begin), b0);
          EXPECT_LE(b1, int64_t(part.byte_end));
          EXPECT_LT(part.block_begin, part.block_end);
          EXPECT_EQ(part.whole_block, b0 == int64_t(part.byte_begin) && b1 == int64_t(part.byte_end));
          // A SentencePiece text piece's first token carries the space it adds.
          std::string spelled;
          bool space_prefix = false;
          for (int32_t t = part.block_begin; t < part.block_end; ++t) {
            std::string piece = tok->token_to_piece(p.ids[t]);
            const size_t at = size_t(b0) + spelled.size();
            if (t == part.block_begin && !piece.empty() && piece[0] == ' ' && p.text.compare(at, 1, " ") != 0) {
              piece.erase(0, 1);  // (a lone space token spells nothing)
              space_prefix = true;
              if (piece.empty()) continue;
            }
            spelled += !piece.empty() && p.text.compare(at, piece.size(), piece) == 0 ? piece : tok->token_text(p.ids[t]);
          }
          const std::string bytes = p.text.substr(size_t(b0), size_t(b1 - b0));
          EXPECT_EQ(spelled, bytes) << "part " << part.index << (space_prefix ? " (space prefix)" : "");
        }
      }
      total += blocks;
    }
    EXPECT_GT(total, 0) << vocab;
    EXPECT_GE(templates, 8);
  }
}

}  // namespace
}  // namespace pc::server
