#include "tokenizer/unicode.h"

#include <array>

namespace pc::unicode {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t complete_utf8_prefix(std::string_view s) {
  const size_t n = s.size();
  // A sequence is at most 4 bytes, so its lead byte is within the last 4.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    // ASCII or an invalid lead byte: nothing to wait for.
    if (need == 0) return n;
    return back < need ? n - back : n;
  }
  return n;  // only continuation bytes at the end: invalid, emit them
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte;  // every mapped code point is < 0x144
  ByteMap() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_unicode[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

int unicode_to_byte(uint32_t cp) {
  return cp < byte_map().to_byte.size() ? byte_map().to_byte[cp] : -1;
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t& len) {
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  size_t n = 1;
  uint32_t cp = b0;
  if ((b0 & 0xE0) == 0xC0) { n = 2; cp = b0 & 0x1F; }
  else if ((b0 & 0xF0) == 0xE0) { n = 3; cp = b0 & 0x0F; }
  else if ((b0 & 0xF8) == 0xF0) { n = 4; cp = b0 & 0x07; }
  if (n == 1 || i + n > s.size()) { len = 1; return b0; }
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) { len = 1; return b0; }
    cp = (cp << 6) | (b & 0x3F);
  }
  len = n;
  return cp;
}

}  // namespace pc::unicode
