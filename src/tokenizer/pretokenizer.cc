#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"

namespace pc {

namespace {

// Llama 3 (tokenizer.json): "(?i:'s|'t|'re|'ve|'m|'ll|'d)|...". The
// case-insensitive group is spelled out with classes: under UCP (?i) would also
// fold e.g. U+017F "ſ" onto 's', which the reference tokenizers do not.
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

// Qwen2: as Llama 3 but every digit is its own word.
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

// Qwen3.5 (llama.cpp's "qwen35"): Qwen2's single digits, with combining marks
// (\p{M}) part of a word and never part of a punctuation run, so a letter and
// the marks on it stay one word.
constexpr const char* kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+"
    "|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

// o200k_base (tiktoken's published pat_str; llama.cpp's "gpt-4o", used by
// gpt-oss and Llama 4). A word is an optional leading non-letter, then either
// upper/title-case letters followed by lower-case ones or an all-caps run, so
// "HelloWorld" splits at the capital; a contraction stays on its word ("don't"
// is one piece); digits in runs of up to three; a punctuation run keeps the
// newlines and slashes after it. Marks (\p{M}) and Lm/Lo letters count on both
// sides of the case split. The contraction group is (?i:...) in the original;
// spelled with classes here for the reason given at kLlama3.
constexpr const char* kO200k =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

// GPT-2 (encoder.py), case-sensitive contractions.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::vector<std::unique_ptr<Regex>> regexes)
    : regexes_(std::move(regexes)) {}
PreTokenizer::~PreTokenizer() = default;

std::unique_ptr<PreTokenizer> PreTokenizer::create(const std::string& name) {
  std::vector<const char*> patterns;
  if (name == "llama-bpe" || name == "llama3") patterns = {kLlama3};
  else if (name == "qwen2") patterns = {kQwen2};
  else if (name == "qwen35") patterns = {kQwen35};
  else if (name == "gpt-4o" || name == "llama4") patterns = {kO200k};
  else if (name == "gpt-2" || name == "gpt2" || name.empty() || name == "default") patterns = {kGpt2};
  else throw Error("unsupported BPE pre-tokenizer (tokenizer.ggml.pre): \"" + name + "\"");

  std::vector<std::unique_ptr<Regex>> regexes;
  for (const char* p : patterns) {
    auto r = std::make_unique<Regex>();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // MATCH_INVALID_UTF: arbitrary bytes are valid subjects (invalid sequences
    // simply never match) and no per-call UTF validation pass is made, which
    // would otherwise cost O(n) for every match and O(n²) per input.
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off,
                            nullptr);
    if (!r->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("pre-tokenizer \"" + name + "\": regex error at " + std::to_string(err_off) +
                  ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
    regexes.push_back(std::move(r));
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(regexes)));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& re : regexes_) {
    // Match data is per call: the compiled pattern is shared between threads.
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    if (!md) throw Error("pre-tokenizer: out of memory");
    next.clear();
    for (std::string_view piece : out) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;  // end of the last match; text before a match is a gap piece
      size_t start = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(re->code, subject, piece.size(), start, 0, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          throw Error("pre-tokenizer: regex match failed (" + std::to_string(rc) + ")");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t b = ov[0], e = ov[1];
        if (e == b) {  // none of our patterns matches empty; guard against looping anyway
          start = b + 1;
          continue;
        }
        if (b > pos) next.push_back(piece.substr(pos, b - pos));
        next.push_back(piece.substr(b, e - b));
        pos = start = e;
      }
      if (pos < piece.size()) next.push_back(piece.substr(pos));
    }
    pcre2_match_data_free(md);
    out.swap(next);
  }
}

}  // namespace pc
