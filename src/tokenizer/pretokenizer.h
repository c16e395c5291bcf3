// Regex pre-tokenization for byte-level BPE (tokenizer.ggml.pre).
//
// The input is cut into words before BPE merges run; merges never cross a
// word boundary. Each named pre-tokenizer is a list of PCRE2 patterns (UTF +
// UCP, so \p{L}, \p{N} and \s follow Unicode) applied in turn: each pattern
// splits every piece the previous one produced into its matches, and any text
// between matches stays a piece of its own, so the pieces always cover the
// input exactly, in order.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pc {

class PreTokenizer {
 public:
  // "llama-bpe"/"llama3", "qwen2", "qwen35", "gpt-4o"/"llama4" (o200k_base),
  // "gpt-2"/"gpt2" (also "" and "default");
  // anything else throws pc::Error naming it.
  static std::unique_ptr<PreTokenizer> create(const std::string& name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` into `out` (cleared first); pieces view `text`.
  // Invalid UTF-8 is allowed: bytes no pattern can match become pieces alone.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Regex;
  explicit PreTokenizer(std::vector<std::unique_ptr<Regex>> regexes);
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace pc
