// llama.cpp's tokenizer test vectors (../shared/vocab): every input must give
// exactly the reference ids (no BOS, parse_special off) and decode back to itself.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

using pc::test::read_file;

// NAME.gguf.inp is, for each input, its exact bytes followed by
// "\n__ggml_vocab_test__\n" (so an input that is "\n" reads "\n\n__ggml..." and
// an empty input is just the separator). The input itself is never trimmed.
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string all = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t hit; (hit = all.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    out.push_back(all.substr(pos, hit - pos));
  EXPECT_EQ(pos, all.size()) << "text after the last separator in " << path;
  return out;
}

// NAME.gguf.out: one line per input, each id preceded by a space; an empty line
// for an input with no tokens.
std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
  std::istringstream ss(read_file(path));
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(ss, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '\n') r += "\\n";
    else if (c == '\t') r += "\\t";
    else r += static_cast<char>(c);
  }
  return r;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchesReferenceIdsAndRoundTrips) {
  const std::string base = test::shared_dir() + "/vocab/ggml-vocab-" + GetParam() + ".gguf";
  auto file = GgufFile::open(base);
  auto tok = Tokenizer::from_gguf(*file);
  const auto inputs = read_inputs(base + ".inp");
  const auto expected = read_outputs(base + ".out");
  ASSERT_GE(inputs.size(), 46u);  // 46 cases in every set; qwen35's has 4 more
  ASSERT_EQ(inputs.size(), expected.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, expected[i]) << "case " << i << ": \"" << escape(inputs[i]) << "\"";
    // Every input in the set is representable: byte-level BPE is lossless, and
    // the SPM vocabularies have byte fallback for everything not in the vocab.
    EXPECT_EQ(tok->decode(expected[i]), inputs[i]) << "case " << i << ": \"" << escape(inputs[i]) << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2",
                                           "qwen35"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pc
