#include "server/chat/value_codec.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

namespace pc::server {

namespace {

constexpr size_t kHeader = 16;

// XXH3_64 of [0, 8) and [16, end): everything but the checksum field itself.
uint64_t checksum(const uint8_t* p, size_t n) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 8);
  XXH3_64bits_update(&st, p + kHeader, n - kHeader);
  return XXH3_64bits_digest(&st);
}

}  // namespace

ValueWriter::ValueWriter(const char (&magic)[4], uint32_t version, size_t reserve) {
  out_.reserve(kHeader + reserve);
  out_.resize(kHeader);
  std::memcpy(out_.data(), magic, 4);
  std::memcpy(out_.data() + 4, &version, 4);
}

void ValueWriter::u32(uint32_t v) { bytes(&v, 4); }

void ValueWriter::bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out_.insert(out_.end(), b, b + n);
}

void ValueWriter::blob(const void* p, size_t n) {
  u32(uint32_t(n));
  bytes(p, n);
}

void ValueWriter::ids(const std::vector<int32_t>& ids) {
  u32(uint32_t(ids.size()));
  bytes(ids.data(), ids.size() * sizeof(int32_t));
}

std::vector<uint8_t> ValueWriter::seal() {
  const uint64_t sum = checksum(out_.data(), out_.size());
  std::memcpy(out_.data() + 8, &sum, 8);
  return std::move(out_);
}

std::string open_value(const std::vector<uint8_t>& bytes, const char (&magic)[4], uint32_t version,
                       const std::string& what) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), magic, 4) != 0) return "not a " + what;
  uint32_t v = 0;
  uint64_t sum = 0;
  std::memcpy(&v, bytes.data() + 4, 4);
  std::memcpy(&sum, bytes.data() + 8, 8);
  if (v != version) return what + " format version " + std::to_string(v);
  if (sum != checksum(bytes.data(), bytes.size())) return what + " checksum mismatch";
  return {};
}

bool ValueReader::take(void* dst, size_t n) {
  if (!ok || b.size() - at < n) return ok = false;
  if (n == 0) return true;  // dst may be an empty vector's null data()
  std::memcpy(dst, b.data() + at, n);
  at += n;
  return true;
}

uint32_t ValueReader::u32() {
  uint32_t v = 0;
  take(&v, 4);
  return v;
}

std::string ValueReader::str() {
  const uint32_t n = u32();
  if (!ok || b.size() - at < n) {
    ok = false;
    return {};
  }
  std::string s(reinterpret_cast<const char*>(b.data() + at), n);
  at += n;
  return s;
}

std::vector<uint8_t> ValueReader::blob() {
  const uint32_t n = u32();
  if (!ok || b.size() - at < n) {
    ok = false;
    return {};
  }
  std::vector<uint8_t> v(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + n));
  at += n;
  return v;
}

std::vector<int32_t> ValueReader::ids() {
  const uint32_t n = u32();
  if (!ok || (b.size() - at) / sizeof(int32_t) < n) {
    ok = false;
    return {};
  }
  std::vector<int32_t> v(n);
  take(v.data(), size_t(n) * sizeof(int32_t));
  return v;
}

}  // namespace pc::server
