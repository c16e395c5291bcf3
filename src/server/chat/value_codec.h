// The framing that values the server keeps in Redis share (remembered replies, stored
// responses): a 16-byte header — 4 magic bytes, a u32 format version, and an XXH3_64
// checksum of everything but the checksum itself — then length-prefixed fields.
// ValueWriter builds one and seals it; open_value checks a header and its checksum;
// ValueReader reads the fields with every read bounds-checked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pc::server {

class ValueWriter {
 public:
  ValueWriter(const char (&magic)[4], uint32_t version, size_t reserve = 0);
  void u32(uint32_t v);
  void bytes(const void* p, size_t n);         // raw, no length
  void blob(const void* p, size_t n);          // u32 length, then the bytes
  void str(const std::string& s) { blob(s.data(), s.size()); }
  void ids(const std::vector<int32_t>& ids);   // u32 count, then the ids
  // The value with its checksum filled in (the writer is spent).
  std::vector<uint8_t> seal();

 private:
  std::vector<uint8_t> out_;
};

// "" when `bytes` has `magic`, `version` and a matching checksum; else why not
// (`what` names the value in the message).
std::string open_value(const std::vector<uint8_t>& bytes, const char (&magic)[4], uint32_t version,
                       const std::string& what);

// Reads fields after the header; `ok` turns false on a read past the end, and every
// later read returns empty.
struct ValueReader {
  const std::vector<uint8_t>& b;
  size_t at = 16;
  bool ok = true;
  bool take(void* dst, size_t n);
  uint32_t u32();
  std::string str();
  std::vector<uint8_t> blob();
  std::vector<int32_t> ids();
  bool at_end() const { return ok && at == b.size(); }
};

}  // namespace pc::server
