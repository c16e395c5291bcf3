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
    const std::string_view t = text.substr(size_t(from), size_t(e - from));
    const size_t blank = t.rfind("\n\n");
    if (blank == std::string_view::npos) continue;
    const bool text_after = t.find_first_not_of(" \t\r\n", blank + 2) != std::string_view::npos;
    out[i] = text_after ? kParagraphStart : kParagraphEnd;
  }
  return out;
}

void mark_content_starts(std::vector<uint8_t>& breaks, const std::vector<RequestPart>& parts,
                         const nlohmann::json& messages, const std::string& text, const std::vector<int64_t>& offsets,
                         const ChunkOptions& o) {
  if (!messages.is_array() || offsets.size() != breaks.size() + 1) return;
  for (const RequestPart& p : parts) {
    if (p.kind != RequestPart::Kind::kMessage || !p.is_block || p.block_end - p.block_begin < o.min_part) continue;
    if (p.index < 0 || p.index >= int(messages.size()) || p.byte_begin > p.byte_end || p.byte_end > text.size())
      continue;
    const nlohmann::json& m = messages[size_t(p.index)];
    const auto c = m.is_object() ? m.find("content") : m.end();
    if (c == m.end() || !c->is_string() || c->get_ref<const std::string&>().empty()) continue;
    // Searched within the message's bytes only (as split_content_parts does).
    const size_t in = std::string_view(text).substr(p.byte_begin, p.byte_end - p.byte_begin)
                          .find(c->get_ref<const std::string&>());
    if (in == std::string::npos || in == 0) continue;
    // The first token that starts at or after the content's first byte.
    const auto k = std::lower_bound(offsets.begin(), offsets.end(), int64_t(p.byte_begin + in)) - offsets.begin();
    if (k > p.block_begin && k < p.block_end) breaks[size_t(k)] |= kContentStart;
  }
}

std::vector<KvBlock> content_chunks(std::span<const int32_t> ids, std::span<const uint8_t> breaks, KvBlock b,
                                    const ChunkOptions& o) {
  std::vector<KvBlock> out;
  if (b.begin < 0 || b.end > int32_t(ids.size()) || b.end <= b.begin) return out;
  if (b.end - b.begin < std::max(o.min_part, 2 * o.min_chunk)) return {b};
  auto flags = [&](int32_t i) -> uint8_t { return i >= 0 && size_t(i) < breaks.size() ? breaks[size_t(i)] : 0; };
  // Position p starts a paragraph (or a content): a chunk may start there.
  auto starts = [&](int32_t p) {
    return (flags(p - 1) & kParagraphEnd) || (flags(p) & (kParagraphStart | kContentStart));
  };
  // stop[p - b.begin]: the first paragraph start at or after p (b.end when none).
  std::vector<int32_t> stop(size_t(b.end - b.begin + 1), b.end);
  for (int32_t p = b.end - 1; p > b.begin; --p) stop[size_t(p - b.begin)] = starts(p) ? p : stop[size_t(p + 1 - b.begin)];
  int32_t start = b.begin;
  for (int32_t i = b.begin; i < b.end; ++i) {
    const int32_t len = i + 1 - start;
    if (i + 1 == b.end) continue;
    // A message's content starts a chunk: its role line before it is one of its own.
    bool cut = flags(i + 1) & kContentStart;
    if (!cut && len < o.min_chunk) continue;
    // A paragraph ends a chunk even when a short tail follows (a question after the
    // documents: each document stays a chunk of its own wherever it sits).
    cut = cut || starts(i + 1);
    // The hash and the maximum never leave under min_chunk tokens before the next
    // paragraph start or the part's end: a paragraph's last chunk is then the same
    // whatever follows it.
    if (!cut && stop[size_t(i + 2 - b.begin)] - (i + 1) < o.min_chunk) continue;
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
