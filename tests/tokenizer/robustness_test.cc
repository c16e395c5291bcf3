// Inputs no reference covers: pathological runs (regex backtracking, heap
// sizes) and arbitrary bytes. Encoding must stay fast and lossless.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

class Robustness : public ::testing::TestWithParam<const char*> {
 protected:
  std::unique_ptr<Tokenizer> open() {
    auto f = GgufFile::open(test::shared_dir() + "/vocab/ggml-vocab-" + GetParam() + ".gguf");
    return Tokenizer::from_gguf(*f);
  }
};

TEST_P(Robustness, PathologicalRunsAreFastAndLossless) {
  auto t = open();
  const size_t n = 100000;
  std::vector<std::string> inputs = {
      std::string(n, ' '), std::string(n, '\n'), std::string(n, '7'), std::string(n, '!'),
      std::string(n, '\''),
  };
  std::string mixed, words, cjk;
  while (mixed.size() < n) mixed += " \n\t \r\n  ";
  while (words.size() < n) words += "a ";
  while (cjk.size() < n) cjk += "\xE6\xBC\xA2\xE5\xAD\x97";  // 漢字
  inputs.push_back(mixed);
  inputs.push_back(words);
  inputs.push_back(cjk);
  for (const std::string& s : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = t->encode(s, false, false);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // Release builds take ~0.2 s; the bound leaves room for sanitizer builds
    // while still catching anything quadratic (which would take minutes).
    EXPECT_LT(ms, 3000.0) << "input starting with byte " << int(s[0]);
    EXPECT_EQ(t->decode(ids), s) << "input starting with byte " << int(s[0]);
  }
}

// Random bytes, valid UTF-8 or not, survive encode → decode unchanged: every
// vocabulary here is byte-level BPE or SPM with byte fallback. The one
// exception is inherent to SentencePiece: a literal "▁" (U+2581) in the input is
// the same symbol as an escaped space, so it comes back as " ".
TEST_P(Robustness, ArbitraryBytesRoundTrip) {
  auto t = open();
  const bool spm = std::string(GetParam()) == "llama-spm" || std::string(GetParam()) == "phi-3";
  auto expected = [&](std::string s) {
    if (!spm) return s;
    for (size_t p; (p = s.find("\xE2\x96\x81")) != std::string::npos;) s.replace(p, 3, " ");
    return s;
  };
  std::mt19937 rng(1234);
  const std::string alphabet = std::string("ab \n\t'1.") + "\xE2\x96\x81" + "\xC3\xA9" + "\xF0\x9F\x98\x80";
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int len = rng() % 40;
    for (int i = 0; i < len; ++i) {
      if (rng() % 3 == 0) s += static_cast<char>(rng() % 256);
      else s += alphabet[rng() % alphabet.size()];
    }
    EXPECT_EQ(t->decode(t->encode(s, false, false)), expected(s)) << "iteration " << iter;
  }
}

INSTANTIATE_TEST_SUITE_P(All, Robustness,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pc
