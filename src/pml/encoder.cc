#include "pml/encoder.h"

#include "gguf/gguf.h"
#include "pml/hash.h"
#include "tokenizer/tokenizer.h"

namespace pc::pml {

namespace {

// Text that exercises spaces, digits, punctuation, newlines and non-ASCII, so
// tokenizers with the same vocabulary but different pre-tokenizers differ.
constexpr std::string_view kProbe =
    "The quick brown fox jumps over 13 lazy dogs!\n\n  It's 3.14159, isn't it?\t"
    "naïve café 東京 😀 <|im_start|> </s>";

uint64_t fingerprint_of(const Tokenizer& tok, const RoleMarkers& m) {
  Hasher h;
  h.str("pml-encoder-v1").i64(tok.n_vocab()).i64(tok.bos()).i64(tok.eos()).i64(tok.add_bos());
  for (int32_t i = 0; i < tok.n_vocab(); ++i) h.str(tok.token_text(i));
  h.ids(tok.encode(kProbe, false, false)).ids(tok.encode(kProbe, true, true));
  for (const RoleMarker* r : {&m.system, &m.user, &m.assistant}) h.str(r->prefix).str(r->suffix);
  h.str(m.generation_prompt);
  return h.digest();
}

}  // namespace

Encoder::Encoder(const Tokenizer& tok, RoleMarkers markers)
    : tok_(tok), markers_(std::move(markers)), fingerprint_(fingerprint_of(tok_, markers_)) {}

Encoder Encoder::for_model(const Tokenizer& tok, const GgufFile& f) {
  return Encoder(tok, RoleMarkers::for_model(f, tok));
}

std::vector<int32_t> Encoder::text(std::string_view s) const { return tok_.encode(s, false, false); }

std::vector<int32_t> Encoder::marker(std::string_view s) const { return tok_.encode(s, false, true); }

int32_t Encoder::bos() const { return tok_.add_bos() && tok_.bos() >= 0 ? tok_.bos() : -1; }

}  // namespace pc::pml
