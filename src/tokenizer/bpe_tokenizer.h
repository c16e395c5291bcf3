// Byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2").
//
// A raw fragment is encoded as GPT-2 / tiktoken-style tokenizers do:
//   1. split into words with the pre-tokenizer's regex (tokenizer.ggml.pre);
//   2. each word's bytes are mapped to printable code points (GPT-2
//      bytes_to_unicode, e.g. ' ' → 'Ġ'), the alphabet vocabulary texts use;
//   3. with ignore_merges (Llama 3) a word that is itself a token is taken whole;
//   4. otherwise start from one symbol per mapped character and repeatedly
//      merge the adjacent pair with the lowest rank in tokenizer.ggml.merges
//      (ties: leftmost first) until no pair is a merge.
#pragma once
#include <memory>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace pc {

class BpeTokenizer final : public VocabTokenizer {
 public:
  // `merges`: "left right" strings, best (rank 0) first.
  BpeTokenizer(Vocab v, const std::vector<std::string>& merges,
               std::unique_ptr<PreTokenizer> pre, bool ignore_merges);
  std::string token_to_piece(int32_t id) const override;

 protected:
  void encode_raw(std::string_view text, bool after_special,
                  std::vector<int32_t>& out) const override;

 private:
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

  TokenIdMap rank_;  // "left right" → merge rank (first occurrence wins)
  std::unique_ptr<PreTokenizer> pre_;
  bool ignore_merges_;
};

}  // namespace pc
