// Generated token ids → text, with stop strings.
//
// Text is released only when it can no longer be part of a stop string: a tail
// that is a prefix of some stop string is held back until the next token shows
// whether the stop string completes (matching works across token boundaries).
// A matched stop string and everything after it are never emitted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pc::server {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stops);

  // Feeds one generated token; returns the text that may be emitted now.
  // After a stop string matched, stopped() is true and further pushes return "".
  std::string push(int32_t id);
  // End of generation without a stop match: releases whatever is held.
  std::string finish();

  bool stopped() const { return stopped_; }
  // The stop string that matched (earliest in the text), when stopped().
  const std::string& matched_stop() const { return matched_; }
  const std::string& text() const { return emitted_; }  // everything released so far
  const std::vector<int32_t>& ids() const { return ids_; }

  // The longest prefix of the generated ids whose text is a prefix of text(),
  // without trailing end-of-generation tokens; *tail gets the rest of text()
  // (non-empty only when a stop string cut a token in the middle).
  std::vector<int32_t> ids_for_text(std::string* tail) const;

  // Generated tokens whose text was (at least partly) released so far: the ones
  // a response reports logprobs for. A stop string drops the tokens after it, and
  // an end-of-generation token (no text) at the end is never released. The count
  // only grows; `known` (an earlier answer) lets the scan start there.
  size_t released_tokens(size_t known = 0) const;
  // Byte offset of token i's text in text().
  size_t token_offset(size_t i) const { return i ? piece_end_[i - 1] : 0; }

 private:
  std::string release(std::string s);

  const Tokenizer& tok_;
  StreamDecoder dec_;
  std::vector<std::string> stops_;
  std::string held_;                // decoded, not yet released
  std::string emitted_;
  std::vector<int32_t> ids_;        // every generated id
  std::vector<size_t> piece_end_;   // [i]: bytes of text of ids_[0..i]
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace pc::server
