// The vocabulary both tokenizer kinds share (tokenizer.ggml.* metadata), the
// splitting of input text around special tokens, and the Tokenizer methods that
// only depend on the vocabulary.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace pc {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct TokenTextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, TokenTextHash, std::equal_to<>>;

struct Vocab {
  std::vector<std::string> text;  // [n_vocab]
  std::vector<float> score;       // [n_vocab], 0 when the file has no scores
  std::vector<TokenType> type;    // [n_vocab], kNormal when the file has no types
  TokenIdMap id_of;              // text → id; a repeated text maps to its last id

  // -1 where absent or out of range.
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM only

  // Ids whose text is matched in the input before normal tokenization
  // (control, user-defined, unknown), longest text first.
  std::vector<int32_t> specials;
  std::vector<uint8_t> eog;  // [n_vocab] 1 for end-of-generation tokens

  // Reads tokens, scores, types and the special ids. `spm` picks the defaults
  // for keys the file lacks (SentencePiece: BOS 1, EOS 2, UNK 0, add BOS,
  // space prefix; BPE: none, no BOS unless `bpe_default_add_bos`).
  static Vocab load(const GgufFile& f, bool spm, bool bpe_default_add_bos);

  int32_t n() const { return static_cast<int32_t>(text.size()); }
  // Id of `s` as a piece of ordinary text: control tokens are never produced
  // from text that way (only through parse_special). -1 if none.
  int32_t text_id(std::string_view s) const {
    auto it = id_of.find(s);
    if (it == id_of.end() || type[it->second] == TokenType::kControl) return -1;
    return it->second;
  }

  // A span of the input: either a special token (id >= 0) or raw text to tokenize.
  struct Fragment {
    int32_t id;
    std::string_view raw;
  };
  // Splits `text` around occurrences of special-token texts, as llama.cpp
  // does: tokens are taken longest text first, each one splitting every raw
  // fragment at all its non-overlapping occurrences, left to right.
  // User-defined tokens are always matched (as Hugging Face "added tokens" are);
  // control and unknown ones only with parse_special.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
};

// Implements the Tokenizer methods that depend only on the vocabulary; the
// subclasses supply how a raw-text fragment becomes ids and how a token reads.
class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(Vocab v) : v_(std::move(v)) {}

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::vector<int32_t> encode_continuation(std::string_view text, bool parse_special) const override;
  int32_t n_vocab() const override { return v_.n(); }
  const std::string& token_text(int32_t id) const override;
  int32_t bos() const override { return v_.bos; }
  int32_t eos() const override { return v_.eos; }
  bool add_bos() const override { return v_.add_bos; }
  bool add_eos() const override { return v_.add_eos; }
  bool is_eog(int32_t id) const override {
    return id >= 0 && id < v_.n() && v_.eog[id];
  }
  bool is_control(int32_t id) const override {
    return id >= 0 && id < v_.n() && v_.type[id] == TokenType::kControl;
  }
  const Vocab& vocab() const { return v_; }

 protected:
  // Appends the ids of one raw-text fragment. `after_special`: the fragment
  // starts the input or follows a special token (SPM adds its space prefix then).
  virtual void encode_raw(std::string_view text, bool after_special,
                          std::vector<int32_t>& out) const = 0;
  // Special-token partition of text, each raw fragment through encode_raw;
  // `after_special` for the first fragment.
  void encode_fragments(std::string_view text, bool parse_special, bool after_special,
                        std::vector<int32_t>& out) const;

  Vocab v_;
};

}  // namespace pc
