// Everything PML needs from a model to turn text into tokens: the tokenizer and
// the role markers of its chat template. Built once per model.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "pml/role_markers.h"

namespace pc {
class Tokenizer;
}

namespace pc::pml {

class Encoder {
 public:
  // `tok` must outlive the encoder.
  Encoder(const Tokenizer& tok, RoleMarkers markers);
  // Markers from the file's tokenizer.chat_template, plain ones without it.
  static Encoder for_model(const Tokenizer& tok, const GgufFile& f);

  const Tokenizer& tokenizer() const { return tok_; }
  const RoleMarkers& markers() const { return markers_; }
  // Identity of the tokenizer (vocabulary, special ids, BOS behaviour, how it
  // splits a fixed probe text) and of the markers: part of every schema digest.
  uint64_t fingerprint() const { return fingerprint_; }

  // Ordinary text: no BOS, special-token text is spelled out, not parsed.
  std::vector<int32_t> text(std::string_view s) const;
  // Marker text: special-token text ("<|im_start|>") becomes its token.
  std::vector<int32_t> marker(std::string_view s) const;
  // BOS id when the model adds one at the start of a sequence, else -1.
  int32_t bos() const;

 private:
  const Tokenizer& tok_;
  RoleMarkers markers_;
  uint64_t fingerprint_ = 0;
};

}  // namespace pc::pml
