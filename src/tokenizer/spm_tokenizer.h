// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama").
//
// A raw fragment is encoded as llama.cpp (and SentencePiece's BPE model) do:
//   1. spaces → "▁" (U+2581); a leading "▁" when add_space_prefix and the
//      fragment starts the input or follows a special token;
//   2. one symbol per UTF-8 character (a malformed byte is a symbol alone);
//   3. repeatedly merge the adjacent pair whose concatenation is a token with
//      the highest score (ties: leftmost pair first);
//   4. symbols that are not tokens (always single characters) become their
//      <0xXX> byte tokens, or the unknown token if the vocabulary has none.
#pragma once
#include <array>

#include "tokenizer/vocab.h"

namespace pc {

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(Vocab v);
  std::string token_to_piece(int32_t id) const override;

 protected:
  void encode_raw(std::string_view text, bool after_special,
                  std::vector<int32_t>& out) const override;
  bool strips_space_prefix() const override { return v_.add_space_prefix; }

 private:
  std::array<int32_t, 256> byte_id_;  // <0xXX> token per byte, -1 if absent
  bool has_byte_tokens_ = false;
};

}  // namespace pc
