#include "server/chat/content_chunks.h"

#include <xxhash.h>

#include <algorithm>

namespace pc::server {

std::vector<uint8_t> paragraph_breaks(std::string_view text, const std::vector<int64_t>& offsets, size_t n_tokens) {
  std::vector<uint8_t> out(n_tokens, 0);
  if (offsets.size() != n_tokens + 1) return out;
  for (size_t i = 0; i < n_tokens; ++i) {
    const int64_t b = offsets[i], e = offsets[i + 1];
    if (b < 0 || e > int64_t(text.size()) || e <= b) continue;
    // A blank line inside the token, or one its first byte completes.
    const int64_t from = std::max<int64_t>(0, b - 1);
    out[i] = text.substr(size_t(from), size_t(e - from)).find("\n\n") != std::string_view::npos;
  }
  return out;
}

std::vector<KvBlock> content_chunks(std::span<const int32_t> ids, std::span<const uint8_t> breaks, KvBlock b,
                                    const ChunkOptions& o) {
  std::vector<KvBlock> out;
  if (b.begin < 0 || b.end > int32_t(ids.size()) || b.end <= b.begin) return out;
  if (b.end - b.begin < std::max(o.min_part, 2 * o.min_chunk)) return {b};
  int32_t start = b.begin;
  for (int32_t i = b.begin; i < b.end; ++i) {
    const int32_t len = i + 1 - start;
    if (len < o.min_chunk || i + 1 == b.end) continue;
    // A paragraph ends a chunk even when a short tail follows (a question after the
    // documents: each document stays a chunk of its own wherever it sits); the hash and
    // the maximum never leave a tail under min_chunk.
    bool cut = size_t(i) < breaks.size() && breaks[size_t(i)];
    if (!cut && b.end - (i + 1) < o.min_chunk) continue;
    cut = cut || len >= o.max_chunk;
    if (!cut && i + 1 - b.begin >= o.window) {
      const uint64_t h = XXH64(ids.data() + (i + 1 - o.window), size_t(o.window) * sizeof(int32_t), 0x5eedc4u);
      cut = h % uint64_t(o.hash_period) == 0;
    }
    if (cut) {
      out.push_back({start, i + 1});
      start = i + 1;
    }
  }
  out.push_back({start, b.end});
  return out;
}

std::vector<KvBlock> chunk_blocks(const std::vector<KvBlock>& blocks, std::span<const int32_t> ids,
                                  std::span<const uint8_t> breaks, const ChunkOptions& o) {
  std::vector<KvBlock> out;
  for (const KvBlock& b : blocks) {
    const std::vector<KvBlock> c = content_chunks(ids, breaks, b, o);
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

}  // namespace pc::server
