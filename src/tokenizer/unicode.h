// UTF-8 helpers and the GPT-2 byte↔unicode mapping used by byte-level BPE.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pc::unicode {

// Length of the UTF-8 sequence that byte `b` starts. Continuation bytes and
// invalid lead bytes count as 1, so that splitting arbitrary bytes into
// "characters" always advances and never loses a byte.
inline size_t utf8_seq_len(uint8_t b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

// Byte length of the character at s[i]: the sequence its lead byte announces
// if that many continuation bytes follow, else 1 (a malformed byte stands
// alone, so it can never swallow the bytes of a following valid character).
inline size_t utf8_char_len(std::string_view s, size_t i) {
  const size_t len = utf8_seq_len(static_cast<uint8_t>(s[i]));
  if (len == 1 || i + len > s.size()) return 1;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return 1;
  return len;
}

void append_utf8(std::string& out, uint32_t cp);

// Length of the longest prefix of `s` that does not end inside an incomplete
// (but so far valid-looking) UTF-8 sequence. Invalid bytes are not held back:
// waiting for more bytes could never make them valid.
size_t complete_utf8_prefix(std::string_view s);

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order. Returned as UTF-8.
const std::string& byte_to_unicode(uint8_t b);
// Inverse of byte_to_unicode; -1 for code points outside the mapping.
int unicode_to_byte(uint32_t cp);

// Decodes the code point starting at s[i] and sets `len` to its byte length.
// A malformed sequence decodes as the single byte (cp = the byte value, len 1).
uint32_t decode_utf8(std::string_view s, size_t i, size_t& len);

}  // namespace pc::unicode
