#include "tier/entry.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace pc {

static_assert(std::endian::native == std::endian::little, "tier entries are little-endian");

namespace {

constexpr char kMagic[8] = {'P', 'C', 'K', 'V', 'E', 'N', 'T', '1'};
constexpr uint32_t kFlagZstd = 1;
constexpr uint32_t kFlagState = 2;
// Sanity bounds: reject absurd headers before allocating anything.
constexpr int32_t kMaxDim = 1 << 16;
constexpr int32_t kMaxTokens = 1 << 24;

template <class T>
void put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// XXH3_64 of [0,16) + [32, end): everything but the two checksum fields.
uint64_t checksum_of(const uint8_t* p, size_t end) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 16);
  XXH3_64bits_update(&st, p + 32, end - 32);
  return XXH3_64bits_digest(&st);
}

// Header bytes for the given strings and token count.
size_t header_size(const KvNamespace& ns, size_t n_tokens) {
  return align_up(align_up(kEntryFixedHeader + ns.model.size() + ns.kv_type.size() + tier_scope_bytes(ns).size(), 4) +
                      2 * n_tokens * sizeof(int32_t),
                  8);
}

template <class T>
Decoded<T> fail(EntryError e, std::string msg) {
  Decoded<T> d;
  d.error = e;
  d.message = std::string(to_string(e)) + ": " + msg;
  return d;
}

bool shape_ok(const KvShape& s) {
  return s.n_layer > 0 && s.n_layer <= kMaxDim && s.n_kv_head > 0 && s.n_kv_head <= kMaxDim &&
         s.head_dim > 0 && s.head_dim <= kMaxDim && s.page_size > 0 && s.page_size <= kMaxDim;
}

std::string shape_str(const KvShape& s) {
  return std::to_string(s.n_layer) + "x" + std::to_string(s.n_kv_head) + "x" + std::to_string(s.head_dim) +
         " page " + std::to_string(s.page_size);
}

}  // namespace

const char* to_string(EntryError e) {
  switch (e) {
    case EntryError::kOk: return "ok";
    case EntryError::kTruncated: return "truncated entry";
    case EntryError::kBadMagic: return "not a KV entry";
    case EntryError::kBadVersion: return "unsupported entry format version";
    case EntryError::kCorrupt: return "corrupt entry";
    case EntryError::kChecksum: return "entry checksum mismatch";
    case EntryError::kDecompress: return "entry payload does not decompress";
    case EntryError::kWrongModel: return "entry of another model";
    case EntryError::kWrongKvType: return "entry of another KV type";
    case EntryError::kWrongShape: return "entry of another KV shape";
    case EntryError::kWrongTokens: return "entry of other tokens";
  }
  return "unknown entry error";
}

uint64_t entry_max_bytes(const KvNamespace& ns, const KvShape& shape, size_t n_tokens, uint64_t state_bytes) {
  if (shape.page_size <= 0) return 0;
  const uint64_t n_pages = (n_tokens + size_t(shape.page_size) - 1) / size_t(shape.page_size);
  return header_size(ns, n_tokens) + n_pages * shape.bytes_per_page() +
         state_bytes;  // stored compressed only when smaller
}

int32_t EntryInfo::n_pages() const {
  return shape.page_size > 0 ? (n_tokens() + shape.page_size - 1) / shape.page_size : 0;
}

uint64_t EntryInfo::key() const {
  return has_state() ? state_key(ns, shape, link.parent, tokens) : link_key(ns, shape, link.parent, tokens);
}

bool EntryInfo::is(const KvNamespace& want_ns, const LinkPos& want, std::span<const int32_t> want_tokens) const {
  return ns == want_ns && link.start == want.start && link.parent == want.parent &&
         std::ranges::equal(tokens, want_tokens);
}

std::vector<uint8_t> serialize_entry(const KvPageStore& kv, std::span<const int32_t> pages,
                                     std::span<const int32_t> tokens, const KvNamespace& ns,
                                     const SerializeOptions& opt) {
  return serialize_link(kv, pages, tokens, ns, LinkPos{}, opt);
}

std::vector<std::vector<uint8_t>> serialize_chain(const KvPageStore& kv, std::span<const int32_t> pages,
                                                  std::span<const int32_t> tokens, const KvNamespace& ns) {
  const int32_t P = kv.shape().page_size;
  const size_t n = std::min(pages.size(), tokens.size() / size_t(P));
  std::vector<std::vector<uint8_t>> out;
  for (const ChainLink& l : chain_links(ns, kv.shape(), tokens.first(n * size_t(P))))
    out.push_back(serialize_link(kv, pages.subspan(size_t(l.start / P), 1), tokens.subspan(size_t(l.start), size_t(P)),
                                 ns, LinkPos{l.start, l.parent}));
  return out;
}

namespace {

// A link's entry; `state` non-empty: a state entry (its floats after the pages).
std::vector<uint8_t> serialize(const KvPageStore& kv, std::span<const int32_t> pages, std::span<const int32_t> tokens,
                               const KvNamespace& ns, const LinkPos& link, std::span<const float> state,
                               const SerializeOptions& opt) {
  const KvShape& s = kv.shape();
  const size_t n = tokens.size();
  if (n == 0 || n > size_t(kMaxTokens)) throw std::invalid_argument("serialize_entry: bad token count");
  if (link.start < 0 || link.start > kMaxTokens) throw std::invalid_argument("serialize_entry: bad link start");
  if (pages.size() != (n + s.page_size - 1) / s.page_size)
    throw std::invalid_argument("serialize_entry: page count does not match the token count");
  const std::string scope = tier_scope_bytes(ns);
  if (ns.model.size() > 0xffff || ns.kv_type.size() > 0xffff || scope.size() > 0xffff)
    throw std::invalid_argument("serialize_entry: namespace string too long");
  for (int32_t p : pages)
    if (p < 0 || p >= kv.n_pages()) throw std::invalid_argument("serialize_entry: page out of range");
  if (ns.kv_type != kv_type_name(s.kv_type))
    throw std::invalid_argument("serialize_entry: namespace KV type " + ns.kv_type + " is not the store's " +
                                kv_type_name(s.kv_type));

  const size_t hdr = header_size(ns, n);
  const size_t page = s.bytes_per_page();
  const size_t raw = pages.size() * page + state.size_bytes();
  std::vector<uint8_t> out(hdr + raw);  // shrunk below when compressed
  uint8_t* p = out.data();

  // Payload first: raw pages straight into place, then the state.
  uint8_t* payload = p + hdr;
  for (size_t i = 0; i < pages.size(); ++i) {
    const int filled = int(std::min<size_t>(s.page_size, n - i * s.page_size));
    kv.read_page(pages[i], filled, payload + i * page);
  }
  if (!state.empty()) std::memcpy(payload + pages.size() * page, state.data(), state.size_bytes());
  size_t stored = raw;
  uint32_t flags = state.empty() ? 0 : kFlagState;
  if (opt.compress) {
    std::vector<uint8_t> z(ZSTD_compressBound(raw));
    const size_t zn = ZSTD_compress(z.data(), z.size(), payload, raw, opt.zstd_level);
    if (ZSTD_isError(zn)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(zn));
    if (zn < raw) {  // else incompressible: keep the raw pages
      std::memcpy(payload, z.data(), zn);
      stored = zn;
      flags |= kFlagZstd;
      out.resize(hdr + stored);
      p = out.data();
    }
  }

  std::memcpy(p, kMagic, 8);
  put<uint32_t>(p, 8, kEntryVersion);
  put<uint32_t>(p, 12, flags);
  put<uint32_t>(p, 32, uint32_t(hdr));
  put<int32_t>(p, 36, s.n_layer);
  put<int32_t>(p, 40, s.n_kv_head);
  put<int32_t>(p, 44, s.head_dim);
  put<int32_t>(p, 48, s.page_size);
  put<int32_t>(p, 52, int32_t(n));
  put<int32_t>(p, 56, int32_t(pages.size()));
  put<int32_t>(p, 60, link.start);
  put<uint64_t>(p, 64, stored);
  put<uint64_t>(p, 72, raw);
  put<uint16_t>(p, 80, uint16_t(ns.model.size()));
  put<uint16_t>(p, 82, uint16_t(ns.kv_type.size()));
  put<uint16_t>(p, 84, uint16_t(scope.size()));
  put<uint16_t>(p, 86, 0);
  put<uint64_t>(p, 88, link.parent.lo);
  put<uint64_t>(p, 96, link.parent.hi);
  size_t off = kEntryFixedHeader;
  for (const std::string* str : {&ns.model, &ns.kv_type, &scope}) {
    std::memcpy(p + off, str->data(), str->size());
    off += str->size();
  }
  std::memset(p + off, 0, align_up(off, 4) - off);
  off = align_up(off, 4);
  std::memcpy(p + off, tokens.data(), n * sizeof(int32_t));
  off += n * sizeof(int32_t);
  for (size_t t = 0; t < n; ++t) put<int32_t>(p, off + t * 4, kv.pos(pages[t / s.page_size])[t % s.page_size]);
  off += n * sizeof(int32_t);
  std::memset(p + off, 0, hdr - off);

  put<uint64_t>(p, 24, checksum_of(p, hdr));
  put<uint64_t>(p, 16, checksum_of(p, out.size()));
  return out;
}

}  // namespace

std::vector<uint8_t> serialize_link(const KvPageStore& kv, std::span<const int32_t> pages,
                                    std::span<const int32_t> tokens, const KvNamespace& ns, const LinkPos& link,
                                    const SerializeOptions& opt) {
  return serialize(kv, pages, tokens, ns, link, {}, opt);
}

std::vector<uint8_t> serialize_state_link(const KvPageStore& kv, int32_t page, std::span<const int32_t> tokens,
                                          const KvNamespace& ns, const LinkPos& link, std::span<const float> state,
                                          const SerializeOptions& opt) {
  if (state.empty()) throw std::invalid_argument("serialize_state_link: no state");
  if (tokens.size() > size_t(kv.shape().page_size))
    throw std::invalid_argument("serialize_state_link: more tokens than a page");
  return serialize(kv, std::span<const int32_t>(&page, 1), tokens, ns, link, state, opt);
}

uint32_t entry_header_bytes(std::span<const uint8_t> first) {
  if (first.size() < kEntryFixedHeader || std::memcmp(first.data(), kMagic, 8) != 0) return 0;
  return get<uint32_t>(first.data(), 32);
}

Decoded<EntryInfo> parse_entry_header(std::span<const uint8_t> bytes, uint64_t total_size,
                                      const EntryExpect& expect) {
  using D = Decoded<EntryInfo>;
  const uint8_t* p = bytes.data();
  if (bytes.size() < 8 || total_size < 8) return fail<EntryInfo>(EntryError::kTruncated, "shorter than the magic");
  if (std::memcmp(p, kMagic, 8) != 0) return fail<EntryInfo>(EntryError::kBadMagic, "bad magic bytes");
  if (bytes.size() < kEntryFixedHeader)
    return fail<EntryInfo>(EntryError::kTruncated, "shorter than the fixed header (" +
                                                        std::to_string(bytes.size()) + " bytes)");
  const uint32_t version = get<uint32_t>(p, 8);
  if (version != kEntryVersion)
    return fail<EntryInfo>(EntryError::kBadVersion,
                           "version " + std::to_string(version) + ", expected " + std::to_string(kEntryVersion));
  D d;
  EntryInfo& e = d.value;
  const uint32_t flags = get<uint32_t>(p, 12);
  e.checksum = get<uint64_t>(p, 16);
  e.header_bytes = get<uint32_t>(p, 32);
  e.shape = KvShape{get<int32_t>(p, 36), get<int32_t>(p, 40), get<int32_t>(p, 44), get<int32_t>(p, 48)};
  const int32_t n_tokens = get<int32_t>(p, 52);
  const int32_t n_pages = get<int32_t>(p, 56);
  e.link.start = get<int32_t>(p, 60);
  e.link.parent = ChainHash{get<uint64_t>(p, 88), get<uint64_t>(p, 96)};
  e.payload_bytes = get<uint64_t>(p, 64);
  e.raw_bytes = get<uint64_t>(p, 72);
  const size_t lens[3] = {get<uint16_t>(p, 80), get<uint16_t>(p, 82), get<uint16_t>(p, 84)};
  e.compressed = flags & kFlagZstd;
  const bool state = flags & kFlagState;

  if (e.header_bytes < kEntryFixedHeader || e.header_bytes % 8 != 0)
    return fail<EntryInfo>(EntryError::kCorrupt, "bad header length " + std::to_string(e.header_bytes));
  if (total_size < e.header_bytes || bytes.size() < e.header_bytes)
    return fail<EntryInfo>(EntryError::kTruncated, "header of " + std::to_string(e.header_bytes) +
                                                        " bytes, have " + std::to_string(bytes.size()));
  if (get<uint64_t>(p, 24) != checksum_of(p, e.header_bytes))
    return fail<EntryInfo>(EntryError::kChecksum, "header checksum mismatch");
  // From here the header is what the writer wrote; check it is self-consistent.
  if ((flags & ~(kFlagZstd | kFlagState)) != 0) return fail<EntryInfo>(EntryError::kCorrupt, "unknown flags");
  if (!shape_ok(e.shape)) return fail<EntryInfo>(EntryError::kCorrupt, "bad KV shape");
  if (n_tokens <= 0 || n_tokens > kMaxTokens) return fail<EntryInfo>(EntryError::kCorrupt, "bad token count");
  if (e.link.start < 0 || e.link.start > kMaxTokens) return fail<EntryInfo>(EntryError::kCorrupt, "bad link start");
  if (n_pages != (n_tokens + e.shape.page_size - 1) / e.shape.page_size)
    return fail<EntryInfo>(EntryError::kCorrupt, "page count does not match the token count");
  if (e.payload_bytes > (uint64_t(1) << 48)) return fail<EntryInfo>(EntryError::kCorrupt, "bad payload length");
  const size_t strings = kEntryFixedHeader + lens[0] + lens[1] + lens[2];
  if (align_up(align_up(strings, 4) + 2 * size_t(n_tokens) * 4, 8) != e.header_bytes)
    return fail<EntryInfo>(EntryError::kCorrupt, "header length does not match its fields");
  if (total_size != e.header_bytes + e.payload_bytes)
    return fail<EntryInfo>(total_size < e.header_bytes + e.payload_bytes ? EntryError::kTruncated : EntryError::kCorrupt,
                           std::to_string(total_size) + " bytes, header says " +
                               std::to_string(e.header_bytes + e.payload_bytes));

  size_t off = kEntryFixedHeader;
  std::string* dst[2] = {&e.ns.model, &e.ns.kv_type};
  for (int i = 0; i < 2; ++i) {
    dst[i]->assign(reinterpret_cast<const char*>(p + off), lens[i]);
    off += lens[i];
  }
  if (!read_tier_scope_bytes(std::string_view(reinterpret_cast<const char*>(p + off), lens[2]), &e.ns))
    return fail<EntryInfo>(EntryError::kCorrupt, "bad namespace scope");
  // The KV type names the page format (kernels/kv_quant.h), so the payload's length.
  const std::optional<KvType> kv_type = parse_kv_type(e.ns.kv_type);
  if (!kv_type) return fail<EntryInfo>(EntryError::kWrongKvType, "unknown KV type " + e.ns.kv_type);
  e.shape.kv_type = *kv_type;
  if (e.shape.row_bytes() == 0) return fail<EntryInfo>(EntryError::kCorrupt, "bad KV shape for its KV type");
  const uint64_t pages_bytes = uint64_t(n_pages) * e.shape.bytes_per_page();
  if (state) {
    // A state entry: one page of tokens, then a state of whole floats.
    if (n_pages != 1 || e.raw_bytes <= pages_bytes || (e.raw_bytes - pages_bytes) % sizeof(float) != 0 ||
        e.raw_bytes - pages_bytes > (uint64_t(1) << 40))
      return fail<EntryInfo>(EntryError::kCorrupt, "bad state section");
    e.state_bytes = e.raw_bytes - pages_bytes;
  } else if (e.raw_bytes != pages_bytes) {
    return fail<EntryInfo>(EntryError::kCorrupt, "payload length does not match the shape");
  }
  if (!e.compressed && e.payload_bytes != e.raw_bytes)
    return fail<EntryInfo>(EntryError::kCorrupt, "payload length does not match the shape");
  off += lens[2];
  off = align_up(off, 4);
  e.tokens.resize(n_tokens);
  e.positions.resize(n_tokens);
  std::memcpy(e.tokens.data(), p + off, size_t(n_tokens) * 4);
  std::memcpy(e.positions.data(), p + off + size_t(n_tokens) * 4, size_t(n_tokens) * 4);

  if (!expect.model.empty() && e.ns.model != expect.model)
    return fail<EntryInfo>(EntryError::kWrongModel, "model " + e.ns.model + ", expected " + expect.model);
  if (!expect.kv_type.empty() && e.ns.kv_type != expect.kv_type)
    return fail<EntryInfo>(EntryError::kWrongKvType, "KV type " + e.ns.kv_type + ", expected " + expect.kv_type);
  const KvShape& x = expect.shape;
  if ((x.n_layer && x.n_layer != e.shape.n_layer) || (x.n_kv_head && x.n_kv_head != e.shape.n_kv_head) ||
      (x.head_dim && x.head_dim != e.shape.head_dim) || (x.page_size && x.page_size != e.shape.page_size))
    return fail<EntryInfo>(EntryError::kWrongShape, "shape " + shape_str(e.shape) + ", expected " + shape_str(x));
  return d;
}

Decoded<Entry> deserialize_entry(std::vector<uint8_t> bytes, const EntryExpect& expect) {
  Decoded<EntryInfo> h = parse_entry_header(bytes, bytes.size(), expect);
  if (!h.ok()) {
    Decoded<Entry> d;
    d.error = h.error;
    d.message = std::move(h.message);
    return d;
  }
  if (h.value.checksum != checksum_of(bytes.data(), bytes.size()))
    return fail<Entry>(EntryError::kChecksum, "payload checksum mismatch");
  Decoded<Entry> d;
  Entry& e = d.value;
  e.info = std::move(h.value);
  if (!e.info.compressed) {
    e.offset = e.info.header_bytes;
    e.data = std::move(bytes);
    return d;
  }
  e.data.resize(e.info.raw_bytes);
  e.offset = 0;
  const size_t zn = ZSTD_decompress(e.data.data(), e.data.size(), bytes.data() + e.info.header_bytes,
                                    e.info.payload_bytes);
  if (ZSTD_isError(zn) || zn != e.info.raw_bytes)
    return fail<Entry>(EntryError::kDecompress,
                       ZSTD_isError(zn) ? ZSTD_getErrorName(zn) : "decompressed size differs from the header");
  return d;
}

Decoded<Entry> deserialize_asked_entry(std::vector<uint8_t> bytes, const KvNamespace& ns, const KvShape& shape,
                                       const LinkPos& link, std::span<const int32_t> tokens, uint64_t state_bytes) {
  Decoded<Entry> d = deserialize_entry(std::move(bytes), EntryExpect{ns.model, ns.kv_type, shape});
  if (d.ok() && !d.value.info.is(ns, link, tokens)) {
    d.error = EntryError::kWrongTokens;
    d.message = to_string(EntryError::kWrongTokens);
  }
  if (d.ok() && d.value.info.state_bytes != state_bytes) {
    d.error = EntryError::kCorrupt;
    d.message = "a state section of " + std::to_string(d.value.info.state_bytes) + " bytes, expected " +
                std::to_string(state_bytes);
  }
  return d;
}

EntryError restore_entry(const Entry& entry, KvPageStore& kv, std::span<const int32_t> pages) {
  const KvShape& s = kv.shape();
  const KvShape& e = entry.info.shape;
  if (s.n_layer != e.n_layer || s.n_kv_head != e.n_kv_head || s.head_dim != e.head_dim || s.page_size != e.page_size)
    return EntryError::kWrongShape;
  if (int64_t(pages.size()) != entry.info.n_pages() || entry.page_payload().size() != pages.size() * s.bytes_per_page())
    return EntryError::kCorrupt;
  for (int32_t p : pages)
    if (p < 0 || p >= kv.n_pages()) return EntryError::kCorrupt;
  const size_t page = s.bytes_per_page();
  const uint8_t* src = entry.payload().data();
  const int32_t n = entry.info.n_tokens();
  for (size_t i = 0; i < pages.size(); ++i) {
    kv.write_page(pages[i], src + i * page);
    int32_t* pos = kv.pos(pages[i]);
    for (int32_t slot = 0; slot < s.page_size; ++slot) {
      const int64_t t = int64_t(i) * s.page_size + slot;
      pos[slot] = t < n ? entry.info.positions[t] : -1;
    }
  }
  return EntryError::kOk;
}

}  // namespace pc
