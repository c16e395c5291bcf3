// Content-defined chunks of long request parts: a long message, tool result or system
// prompt is split into blocks whose boundaries depend only on its tokens, so a paragraph
// or document that moved inside a message (or to another message) is found in the block
// index (engine/approximate/block_index.h) like a whole part.
//
//   part tokens   [ Document 1:\n ... ¶ | Document 2:\n ...... ¶ | Document 3 ... ]
//                                     ^ boundary after a paragraph break (a token whose
//                                       text holds "\n\n"), or where the rolling hash of
//                                       the last `window` token ids hits, or at max_chunk
//
// A boundary follows token i when at least min_chunk tokens passed since the last one and
// token i ends a paragraph; or, at least min_chunk tokens before the part's end, when
// hash(tokens[i - window + 1 .. i]) % hash_period == 0 or max_chunk tokens passed. Each
// test reads only the tokens themselves, the length since the previous boundary and the
// distance to the part's end, never the position in the prompt: the same text yields the
// same chunks in every request, and after a shift the boundaries fall in step again at
// the first paragraph break or hash hit.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_plan.h"

namespace pc::server {

struct ChunkOptions {
  int32_t min_part = 256;    // tokens; a shorter part stays one block (it is a chunk's size)
  int32_t min_chunk = 24;    // tokens
  int32_t max_chunk = 256;   // tokens
  int32_t window = 8;        // token ids the rolling hash reads
  int32_t hash_period = 96;  // a hash boundary every ~hash_period tokens on average
};

// Token i ends a paragraph: its text (bytes [offsets[i], offsets[i+1]) of `text`) holds a
// blank line. offsets.size() == ids + 1; empty offsets: no paragraph breaks.
std::vector<uint8_t> paragraph_breaks(std::string_view text, const std::vector<int64_t>& offsets, size_t n_tokens);

// The chunks of block b of `ids` (in order, covering it exactly). breaks: as from
// paragraph_breaks (may be empty).
std::vector<KvBlock> content_chunks(std::span<const int32_t> ids, std::span<const uint8_t> breaks, KvBlock b,
                                    const ChunkOptions& o = {});

// Every block of `blocks` split into its content chunks (still in order, not overlapping).
std::vector<KvBlock> chunk_blocks(const std::vector<KvBlock>& blocks, std::span<const int32_t> ids,
                                  std::span<const uint8_t> breaks, const ChunkOptions& o = {});

}  // namespace pc::server
