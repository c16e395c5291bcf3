// Pre-tokenizer splits on the cases each regex is written for. o200k_base
// (gpt-oss, "gpt-4o") has no vocabulary file here, so its regex is checked
// piece by piece against what its published definition says each case gives.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"

namespace pc {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& text) {
  auto p = PreTokenizer::create(pre);
  std::vector<std::string_view> out;
  p->split(text, out);
  return Pieces(out.begin(), out.end());
}

TEST(PreTokenizerO200k, CaseSplitsWordsAtCapitals) {
  // Upper/title-case letters then lower-case ones make one word...
  EXPECT_EQ(split("gpt-4o", "HelloWorld"), (Pieces{"Hello", "World"}));
  EXPECT_EQ(split("gpt-4o", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt-4o", "parseJSONValue"), (Pieces{"parse", "JSONValue"}));
  // ...and a capital run with nothing lower-case after it is a word of its own.
  EXPECT_EQ(split("gpt-4o", "helloWORLD"), (Pieces{"hello", "WORLD"}));
  // The same text under cl100k-style Llama 3 rules is one word.
  EXPECT_EQ(split("llama-bpe", "HelloWorld"), (Pieces{"HelloWorld"}));
}

TEST(PreTokenizerO200k, ContractionsStayOnTheirWord) {
  EXPECT_EQ(split("gpt-4o", "don't"), (Pieces{"don't"}));
  EXPECT_EQ(split("gpt-4o", "DON'T"), (Pieces{"DON'T"}));
  EXPECT_EQ(split("gpt-4o", "I'm here"), (Pieces{"I'm", " here"}));
  EXPECT_EQ(split("gpt-4o", "they'LL"), (Pieces{"they'LL"}));
  // Not a contraction: the apostrophe starts the next word.
  EXPECT_EQ(split("gpt-4o", "rock'n"), (Pieces{"rock", "'n"}));
  // Llama 3 (cl100k rules) splits the contraction off.
  EXPECT_EQ(split("llama-bpe", "don't"), (Pieces{"don", "'t"}));
}

TEST(PreTokenizerO200k, DigitsPunctuationAndWhitespace) {
  EXPECT_EQ(split("gpt-4o", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("gpt-4o", "x=12"), (Pieces{"x", "=", "12"}));
  // A leading non-letter joins the word; a newline never does.
  EXPECT_EQ(split("gpt-4o", "$var _x"), (Pieces{"$var", " _", "x"}));
  EXPECT_EQ(split("gpt-4o", "\nfoo"), (Pieces{"\n", "foo"}));
  // A punctuation run keeps the newlines and slashes that follow it.
  EXPECT_EQ(split("gpt-4o", "Hi!\n\nBye"), (Pieces{"Hi", "!\n\n", "Bye"}));
  EXPECT_EQ(split("gpt-4o", "a.//b"), (Pieces{"a", ".//", "b"}));
  EXPECT_EQ(split("gpt-4o", " {}\n/x"), (Pieces{" {}\n/", "x"}));
  // Whitespace before a word leaves its last space to the word.
  EXPECT_EQ(split("gpt-4o", "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt-4o", "a \n\n b"), (Pieces{"a", " \n\n", " b"}));
  EXPECT_EQ(split("gpt-4o", "end  "), (Pieces{"end", "  "}));
}

TEST(PreTokenizerO200k, MarksAndCaselessScripts) {
  // Lo letters (CJK) count as both cases: one word.
  EXPECT_EQ(split("gpt-4o", "你好世界"), (Pieces{"你好世界"}));
  // A combining acute (U+0301) stays with its letter.
  EXPECT_EQ(split("gpt-4o", "Cafe\xCC\x81 ok"), (Pieces{"Cafe\xCC\x81", " ok"}));
  // Title case (U+01C5 "ǅ") opens a word like a capital.
  EXPECT_EQ(split("gpt-4o", "a\xC7\x85ungla"), (Pieces{"a", "\xC7\x85ungla"}));
}

TEST(PreTokenizerQwen35, MarksJoinTheirLetters) {
  // Qwen2 cuts a combining mark off its letter; Qwen3.5 keeps them together.
  EXPECT_EQ(split("qwen2", "e\xCC\x81!"), (Pieces{"e", "\xCC\x81!"}));
  EXPECT_EQ(split("qwen35", "e\xCC\x81!"), (Pieces{"e\xCC\x81", "!"}));
  // Digits stay single, as in Qwen2.
  EXPECT_EQ(split("qwen35", "x123"), (Pieces{"x", "1", "2", "3"}));
}

TEST(PreTokenizer, EveryNamedRegexCoversItsInput) {
  const std::string text = "Hello, WORLD! don't 12345 \xE4\xBD\xA0\xE5\xA5\xBD\n\n\tx \xFF y";
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "qwen35", "gpt-4o", "llama4"}) {
    std::string joined;
    for (const auto& p : split(name, text)) joined += p;
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizer, UnknownNameIsAnErrorNamingIt) {
  try {
    PreTokenizer::create("gpt-5o");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"gpt-5o\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pc
