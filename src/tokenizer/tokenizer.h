// Tokenizers read from GGUF metadata (tokenizer.ggml.*):
//   model "llama": SentencePiece-style — score-driven merges over UTF-8 characters,
//                  "▁" for spaces, optional space prefix, <0xXX> byte fallback.
//   model "gpt2":  byte-level BPE — pre-split with the pre-tokenizer's regex
//                  (tokenizer.ggml.pre: "llama-bpe", "qwen2", "gpt-2", ...), bytes
//                  mapped to unicode, ranked merges from tokenizer.ggml.merges.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pc {

class GgufFile;

// Immutable once built: every const method may be called from several threads
// at once (encode keeps all scratch state on the caller's stack).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Throws pc::Error if the metadata is missing or names an unsupported model/pre-tokenizer.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);

  // add_special: add BOS/EOS as the model's add_bos_token/add_eos_token say.
  // parse_special: recognise the text of special/control tokens (e.g. "<|im_start|>")
  // and emit their ids instead of tokenizing their characters.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // encode() of text that continues earlier text rather than starting an input:
  // no BOS/EOS, and no SentencePiece space prefix in front of its first text
  // fragment (the prefix belongs to the start of the whole input; a fragment
  // after a special token still gets it, as in encode()). The server tokenizes
  // the text after a spliced reply this way.
  virtual std::vector<int32_t> encode_continuation(std::string_view text, bool parse_special) const {
    return encode(text, false, parse_special);
  }
  // The bytes a token stands for (byte tokens → the byte; "▁" → " "; control → "").
  virtual std::string token_to_piece(int32_t id) const = 0;
  // The text of a whole sequence: the pieces concatenated, except that for an
  // SPM vocabulary with add_space_prefix the one space encode() put in front of
  // the first text token is dropped, so decode(encode(t, false, false)) == t for
  // text the vocabulary can represent. Use token_to_piece / StreamDecoder for
  // continuations (generated text), where no prefix was added.
  std::string decode(const std::vector<int32_t>& ids) const;

  virtual int32_t n_vocab() const = 0;
  virtual const std::string& token_text(int32_t id) const = 0;  // the vocabulary string
  virtual int32_t bos() const = 0;  // -1 if none
  virtual int32_t eos() const = 0;  // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const { return false; }
  // Control tokens (BOS, EOS, <|im_start|> ...): no text of their own.
  virtual bool is_control(int32_t id) const { return false; }
  // End of generation: EOS, EOT, <|im_end|>, <|eot_id|> ...
  virtual bool is_eog(int32_t id) const = 0;

 protected:
  // True when encode() prefixes the first text fragment with a space that
  // decode() must remove (SentencePiece add_space_prefix).
  virtual bool strips_space_prefix() const { return false; }
};

// Turns a stream of token ids into text, holding back bytes of a UTF-8 character
// that is split across tokens until it is complete.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);  // complete characters available so far
  std::string flush();           // whatever is pending (possibly invalid UTF-8)
 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace pc
