// Content-defined chunks of long request parts: a long message, tool result or system
// prompt is split into blocks whose boundaries depend only on its tokens, so a paragraph
// or document that moved inside a message (or to another message) is found in the block
// index (engine/approximate/block_index.h) like a whole part.
//
//   part tokens   [ user\n | Document 1:\n ... ¶ | Document 2:\n ...... ¶ | Question ]
//                          ^                     ^ boundary after a paragraph break (a
//                          |                       token whose text holds "\n\n"), or
//                          |                       where the rolling hash of the last
//                          |                       `window` token ids hits, or at max_chunk
//                          boundary before the message's content (its role line, which
//                          the template renders inside the message, is a chunk apart)
//
// Per token, `breaks` (paragraph_breaks, mark_content_starts) says where paragraphs and
// contents begin and end. A boundary falls
//   - before a token that starts a message's content (kContentStart), at any length:
//     the first document of a message then starts a chunk as it does after a blank line;
//   - after token i, when at least min_chunk tokens passed since the last boundary and
//     token i ends a paragraph (kParagraphEnd) or token i+1 starts one inside it
//     (kParagraphStart: a tokenizer that merges "\n\n" with the next word); a short tail
//     may follow (the question after the documents is a chunk of its own);
//   - after token i, when at least min_chunk tokens passed and at least min_chunk tokens
//     are left before the next paragraph start or the part's end, where
//     hash(tokens[i - window + 1 .. i]) % hash_period == 0 or max_chunk tokens passed
//     (a chunk may so reach max_chunk + min_chunk - 1 tokens).
// Each test reads only the tokens, the length since the previous boundary and the
// distance to the next paragraph start or the part's end, never the position in the
// prompt: the same text yields the same chunks in every request, and after a shift the
// boundaries fall in step again at the first paragraph break or hash hit. A document
// that starts a paragraph (or the message's content) starts a chunk wherever it sits,
// and its last chunk ends at its last token whatever follows it (the next document, or
// the question) — unless a paragraph is shorter than min_chunk, which joins what
// follows it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/kv_plan.h"
#include "server/chat/request_structure.h"

namespace pc::server {

struct ChunkOptions {
  int32_t min_part = 256;    // tokens; a shorter part stays one block (it is a chunk's size)
  int32_t min_chunk = 24;    // tokens (a content's header before kContentStart may be shorter)
  int32_t max_chunk = 256;   // tokens
  int32_t window = 8;        // token ids the rolling hash reads
  int32_t hash_period = 96;  // a hash boundary every ~hash_period tokens on average
};

// Flags of one token in `breaks` (a bit set).
enum ChunkBreak : uint8_t {
  kParagraphEnd = 1,    // a blank line in the token (or one its first byte completes), only whitespace after it
  kParagraphStart = 2,  // a blank line in the token with text after it: a paragraph starts inside the token
  kContentStart = 4,    // the first token of a message's content (mark_content_starts)
};

// kParagraphEnd / kParagraphStart per token: token i spans bytes [offsets[i],
// offsets[i+1]) of `text`. offsets.size() == ids + 1; empty offsets: no paragraph breaks.
std::vector<uint8_t> paragraph_breaks(std::string_view text, const std::vector<int64_t>& offsets, size_t n_tokens);

// Sets kContentStart on the first whole token of each message whose string content the
// template rendered verbatim inside the message's bytes after text of its own (the role
// line), when the message's block has at least min_part tokens (a shorter one is not
// chunked). `messages` as given to split_content_parts.
void mark_content_starts(std::vector<uint8_t>& breaks, const std::vector<RequestPart>& parts,
                         const nlohmann::json& messages, const std::string& text, const std::vector<int64_t>& offsets,
                         const ChunkOptions& o = {});

// The chunks of block b of `ids` (in order, covering it exactly). breaks: as from
// paragraph_breaks and mark_content_starts (may be empty).
std::vector<KvBlock> content_chunks(std::span<const int32_t> ids, std::span<const uint8_t> breaks, KvBlock b,
                                    const ChunkOptions& o = {});

// Every block of `blocks` split into its content chunks (still in order, not overlapping).
std::vector<KvBlock> chunk_blocks(const std::vector<KvBlock>& blocks, std::span<const int32_t> ids,
                                  std::span<const uint8_t> breaks, const ChunkOptions& o = {});

}  // namespace pc::server
