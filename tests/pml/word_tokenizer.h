// A tokenizer for exact layout tests: every whitespace-separated word is one
// token, so positions can be counted by hand. BOS (id 1) is added.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "pml/encoder.h"
#include "pml/pml_error.h"
#include "tokenizer/tokenizer.h"

namespace pc::pml::test {

class WordTokenizer : public Tokenizer {
 public:
  WordTokenizer() : words_{"<unk>", "<s>", "</s>"} {}
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> out;
    if (add_special) out.push_back(1);
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      size_t j = i;
      while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i) out.push_back(id(std::string(text.substr(i, j - i))));
      i = j;
    }
    return out;
  }
  int32_t id(const std::string& w) const {
    auto it = ids_.find(w);
    if (it != ids_.end()) return it->second;
    words_.push_back(w);
    return ids_[w] = static_cast<int32_t>(words_.size() - 1);
  }
  std::string token_to_piece(int32_t id) const override { return words_.at(id) + " "; }
  int32_t n_vocab() const override { return static_cast<int32_t>(words_.size()); }
  const std::string& token_text(int32_t id) const override { return words_.at(id); }
  int32_t bos() const override { return 1; }
  int32_t eos() const override { return 2; }
  bool add_bos() const override { return add_bos_; }
  bool is_eog(int32_t id) const override { return id == 2; }

  bool add_bos_ = true;

 private:
  mutable std::map<std::string, int32_t> ids_;
  mutable std::vector<std::string> words_;
};

// One-word markers, so each is one token.
inline RoleMarkers word_markers() {
  RoleMarkers m;
  m.system = {"<sys>", "</sys>"};
  m.user = {"<usr>", "</usr>"};
  m.assistant = {"<ast>", "</ast>"};
  m.generation_prompt = "<gen>";
  m.origin = "test";
  return m;
}

// Runs f, which must throw PmlError at (line, column) with `part` in its message.
template <class F>
::testing::AssertionResult throws_at(F&& f, int line, int column, const std::string& part) {
  try {
    f();
  } catch (const PmlError& e) {
    if (e.loc().line != line || e.loc().column != column || e.message().find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "got \"" << e.what() << "\" at " << e.loc().line << ":"
                                           << e.loc().column << "; want " << line << ":" << column
                                           << " containing \"" << part << "\"";
    return ::testing::AssertionSuccess() << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a PmlError: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error";
}

}  // namespace pc::pml::test
