// Tier entry: a run of KV pages serialized with a self-describing header. The one
// byte format of every tier below memory (disk files, Redis values, host copies).
//
// Layout (little-endian; offsets in bytes):
//
//   0   magic "PCKVENT1"                8
//   8   format version (kEntryVersion)  u32
//   12  flags                           u32  bit 0: payload is zstd; bit 1: a state entry
//                                            (the payload ends with a recurrent state)
//   16  checksum                        u64  XXH3_64 of [0,16) + [32, end): header and payload
//   24  header checksum                 u64  XXH3_64 of [0,16) + [32, header_bytes)
//   32  header_bytes                    u32  offset of the payload
//   36  n_layer, n_kv_head, head_dim, page_size            4 × i32 (KvShape)
//   52  n_tokens, n_pages                                  2 × i32
//   60  start                           i32  the first token's index in its prefix (a chain
//                                            link: tier/entry_key.h); 0 for unchained entries
//   64  payload_bytes (as stored)       u64
//   72  raw_bytes (uncompressed)        u64  == n_pages × bytes_per_page (+ the state's
//                                            bytes in a state entry)
//   80  model, kv_type, scope lengths   3 × u16, then u16 reserved
//   88  parent                          2 × u64  chain hash of the prefix before `start`
//                                            (lo, hi; {0, 0} at start 0)
//   104 model, kv_type, scope bytes, zero-padded to 4 (scope: the namespace's
//       tier_scope_bytes — tenant, salt, kind, module digest and segment)
//       token ids    i32[n_tokens]
//       position ids i32[n_tokens]      (the slot positions, as KvPageStore::pos)
//       zero padding to 8 → header_bytes
//   header_bytes: payload = n_pages pages, each a page's serialized bytes
//       (KvPageStore::read_page: K,V of every layer, head-major, in the KV type
//       the kv_type string names: f16, q8_0 or q4_0, kernels/kv_quant.h; the
//       pages' length follows from it). Slots of the last page beyond n_tokens
//       are zero, so equal KV gives equal bytes.
//       A state entry (flag bit 1; tier/entry_key.h state_key) then holds the
//       recurrent state after its last token: f32[(raw_bytes - pages) / 4], the
//       floats of RecurrentState::data(). It is shaped like the chain link ending at
//       that token (start, parent, its 1..page_size own tokens and their KV), so a
//       reader restores the partial page and the state together.
//
// The header checksum lets a tier validate a header without reading the payload (the
// disk tier's startup scan); the full checksum is verified by deserialize_entry.
// Every field is validated; bad bytes give an EntryError, never a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/radix_index.h"
#include "tier/entry_key.h"

namespace pc {

// 4: chain links (start and parent hash; keys of tier/entry_key.h). Entries of another
// version are rejected, so old disk/Redis entries are counted misses.
inline constexpr uint32_t kEntryVersion = 4;
inline constexpr size_t kEntryFixedHeader = 104;  // bytes before the strings

enum class EntryError {
  kOk = 0,
  kTruncated,    // fewer bytes than the header says
  kBadMagic,     // not an entry
  kBadVersion,   // written by another format version
  kCorrupt,      // inconsistent fields or trailing bytes
  kChecksum,     // checksum mismatch
  kDecompress,   // zstd payload does not decompress to raw_bytes
  kWrongModel,   // model fingerprint differs from the expected one
  kWrongKvType,  // KV type differs
  kWrongShape,   // KvShape differs
  kWrongTokens,  // not the token sequence that was asked for (key collision)
};
const char* to_string(EntryError e);

// What a reader requires of an entry. Empty strings / zero shape fields: anything.
struct EntryExpect {
  std::string model;
  std::string kv_type;
  KvShape shape{0, 0, 0, 0};
};

// Where an entry sits in its chain (tier/entry_key.h); {0, {}}: an unchained entry.
struct LinkPos {
  int32_t start = 0;
  ChainHash parent;
};

// The header fields, without the payload.
struct EntryInfo {
  KvNamespace ns;
  KvShape shape;
  LinkPos link;
  std::vector<int32_t> tokens;     // [n_tokens]
  std::vector<int32_t> positions;  // [n_tokens] position id of each token's slot
  bool compressed = false;
  uint64_t state_bytes = 0;        // a state entry's state section (0: a KV-only entry)
  uint32_t header_bytes = 0;
  uint64_t payload_bytes = 0;      // as stored
  uint64_t raw_bytes = 0;          // uncompressed
  uint64_t checksum = 0;
  int32_t n_tokens() const { return int32_t(tokens.size()); }
  int32_t n_pages() const;
  uint64_t total_bytes() const { return header_bytes + payload_bytes; }
  // The key the entry is stored under: link_key(ns, shape, link.parent, tokens), or
  // state_key(...) for a state entry.
  uint64_t key() const;
  bool has_state() const { return state_bytes > 0; }
  uint64_t page_bytes() const { return raw_bytes - state_bytes; }  // the pages' part of the payload
  // Whether this is the link asked for: the namespace, start, parent and own tokens.
  bool is(const KvNamespace& want_ns, const LinkPos& want, std::span<const int32_t> want_tokens) const;
};

// A decoded entry: its header and the uncompressed page bytes, [n_pages][page bytes].
struct Entry {
  EntryInfo info;
  std::vector<uint8_t> data;  // owns the payload (at data[offset..offset+raw_bytes))
  size_t offset = 0;
  std::span<const uint8_t> payload() const { return {data.data() + offset, info.raw_bytes}; }
  std::span<const uint8_t> page_payload() const { return payload().first(info.page_bytes()); }
  // A state entry's state (unaligned bytes: copy them out as floats).
  std::span<const uint8_t> state_payload() const { return payload().subspan(info.page_bytes()); }
};

template <class T>
struct Decoded {
  EntryError error = EntryError::kOk;
  std::string message;  // says what failed and why, for logs
  T value{};
  bool ok() const { return error == EntryError::kOk; }
};

struct SerializeOptions {
  bool compress = false;  // zstd the payload
  int zstd_level = 1;
};

// Serializes tokens [0, tokens.size()) whose KV lives in `pages` (aligned: token t in
// pages[t / page_size], slot t % page_size; pages.size() == ceil(n / page_size)).
// Throws std::invalid_argument on a precondition violation.
std::vector<uint8_t> serialize_entry(const KvPageStore& kv, std::span<const int32_t> pages,
                                     std::span<const int32_t> tokens, const KvNamespace& ns,
                                     const SerializeOptions& opt = {});
// The same for one link of a chain: `tokens` are the link's own, `link` its place.
std::vector<uint8_t> serialize_link(const KvPageStore& kv, std::span<const int32_t> pages,
                                    std::span<const int32_t> tokens, const KvNamespace& ns, const LinkPos& link,
                                    const SerializeOptions& opt = {});
// A state entry (see the layout above): `tokens` are the link's own (1..page_size, one
// page), `link` its place, `state` the recurrent state after its last token.
std::vector<uint8_t> serialize_state_link(const KvPageStore& kv, int32_t page, std::span<const int32_t> tokens,
                                          const KvNamespace& ns, const LinkPos& link, std::span<const float> state,
                                          const SerializeOptions& opt = {});
// Every full page of a cached prefix as its chain's links (root first): the entries
// write-through stores for tokens [0, pages.size() × page_size).
std::vector<std::vector<uint8_t>> serialize_chain(const KvPageStore& kv, std::span<const int32_t> pages,
                                                  std::span<const int32_t> tokens, const KvNamespace& ns);

// The largest entry of n_tokens tokens under `ns` with `shape` can be (uncompressed;
// a compressed payload is kept only when smaller): the bound a reader puts on the
// bytes it accepts from a tier it does not trust (tier/redis_reply.h).
// state_bytes: a state entry's state section.
uint64_t entry_max_bytes(const KvNamespace& ns, const KvShape& shape, size_t n_tokens, uint64_t state_bytes = 0);

// Parses and validates the header only (magic, version, sizes, header checksum,
// expectations). `bytes` must hold at least the header; `total_size` is the size of
// the whole entry (a file's size) and must equal header_bytes + payload_bytes.
Decoded<EntryInfo> parse_entry_header(std::span<const uint8_t> bytes, uint64_t total_size,
                                      const EntryExpect& expect = {});
// Bytes needed to parse the header when the first kEntryFixedHeader bytes are known
// (0 when they are not a plausible header).
uint32_t entry_header_bytes(std::span<const uint8_t> first);

// Validates everything (header, checksum, expectations) and decompresses. Takes
// ownership of the bytes so that an uncompressed entry is not copied.
Decoded<Entry> deserialize_entry(std::vector<uint8_t> bytes, const EntryExpect& expect = {});

// deserialize_entry for a tier's reader, which asked for a key: the entry must
// also be the one asked for — `tokens` at `link` under `ns` (kWrongTokens: a key
// collision) with a state section of state_bytes (kCorrupt otherwise).
Decoded<Entry> deserialize_asked_entry(std::vector<uint8_t> bytes, const KvNamespace& ns, const KvShape& shape,
                                       const LinkPos& link, std::span<const int32_t> tokens, uint64_t state_bytes);

// Writes the entry's KV and positions into `pages` (entry.info.n_pages() of them) of
// `kv`. Slots of the last page beyond n_tokens get position -1. Returns kWrongShape
// when kv's shape differs, kCorrupt when the page count differs.
EntryError restore_entry(const Entry& entry, KvPageStore& kv, std::span<const int32_t> pages);

}  // namespace pc
