// Tier keys: which entry holds the KV of a token sequence.
//
// key = XXH3_64(namespace strings, KvShape, token ids). The shape is part of the key so
// that servers with different page sizes share a cache without colliding. An entry is
// stored under the key of its exact token sequence; a reader checks that the entry's
// namespace and tokens are the ones it asked for, so a 64-bit collision is caught and
// treated as a miss.
//
// Prefix lookup. A tier cannot search by prefix, so longest-prefix lookup probes the
// keys of candidate lengths, longest first: the query length itself, then every
// multiple of page_size below it (tokens [0, 16k) for k descending). Entries written
// for demotion therefore cover page-aligned prefixes (and the whole sequence), which
// also keeps every page of an entry full. prefix_keys() computes all candidates in one
// pass over the tokens (an incremental hash, read at each page boundary).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_storage.h"
#include "kv/radix_index.h"

namespace pc {

uint64_t entry_key(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);

struct PrefixKey {
  int32_t length = 0;  // tokens [0, length)
  uint64_t key = 0;
};
// Candidate keys for longest-prefix lookup, longest first: tokens.size(), then the
// multiples of shape.page_size below it, down to page_size (lengths >= min_length).
std::vector<PrefixKey> prefix_keys(const KvNamespace& ns, const KvShape& shape,
                                   std::span<const int32_t> tokens, int32_t min_length = 1);

// 16 lowercase hex digits (file names, Redis keys).
std::string key_hex(uint64_t key);
// Parses key_hex output; false when `s` is not 16 hex digits.
bool parse_key_hex(std::string_view s, uint64_t* key);

}  // namespace pc
