// The structure of a chat request: its parts (tools, messages), the tokens each part's
// block is, and — against the request before it in the namespace — why an exact prefix
// stopped where it did and what that cost.
//
//   rendered text   <|im_start|>system\nYou ...<|im_end|>\n<|im_start|>user\nHi<|im_end|>...
//   template spans  [ none     ][ message 0 ][ none          ][msg 1][ none ...
//   token offsets   byte offset where each prompt token starts (from its piece)
//   blocks          a part's whole tokens: those inside its bytes
//
// A token that straddles a part's first or last byte depends on the text around the part,
// so it is left out of the block; a part with no whole token, or with another part's
// bytes inside it, has no block and is neither indexed nor reported as reusable.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/kv_plan.h"

namespace pc::server {

// One part of a request, as the template spans attribute rendered bytes to it.
struct RequestPart {
  // kContentPart: one text part of a message whose content the client sent as several
  // (documents of a RAG request); `sub` is its index in the content array.
  enum class Kind { kTool, kMessage, kToolCall, kGenerationPrompt, kContentPart };
  Kind kind = Kind::kMessage;
  int index = -1;             // tools[index] / messages[index]
  int sub = -1;               // kToolCall: the call's index in the message; kContentPart: the part's
  std::string role;           // kMessage: its role
  uint64_t hash = 0;          // of the part's request data (what the client sent)
  size_t byte_begin = 0, byte_end = 0;  // its rendered bytes (first to last)
  int32_t tok_begin = -1, tok_end = -1; // tokens overlapping those bytes (-1: unknown)
  // Its block: the whole tokens inside its bytes (a token that straddles its first or
  // last byte depends on the text around it and is left out).
  int32_t block_begin = -1, block_end = -1;
  bool is_block = false;                // it has a block (no other part's bytes inside it)
  bool whole_block = false;             // the block's tokens spell all of its bytes
};

// A rendered byte range attributed to a part (kind/index/sub as in RequestPart;
// kind < 0: template text).
struct PartSpan {
  size_t begin = 0, end = 0;
  int kind = -1;
  int index = -1;
  int sub = -1;
};

// Parts of a request from its rendered spans and the byte offset of each prompt token
// (token_offsets.size() == ids + 1, the last = text size; empty = unknown: no blocks).
std::vector<RequestPart> request_parts(const std::vector<PartSpan>& spans, const nlohmann::json& messages,
                                       const nlohmann::json& tools, const std::vector<int64_t>& token_offsets);
std::vector<KvBlock> blocks_of(const std::vector<RequestPart>& parts);

// A message whose content the client sent as several text parts (`messages` as sent,
// before flattening) gets one kContentPart per text part, after its own part, when the
// message's rendered bytes hold its content verbatim; those parts are the blocks then,
// not the message, so documents that moved inside a message are found at their old
// positions. `text` and `token_offsets` as for request_parts.
void split_content_parts(std::vector<RequestPart>& parts, const nlohmann::json& messages, const std::string& text,
                         const std::vector<int64_t>& token_offsets);

// Why the exact prefix of a request stopped before the request before it in its
// namespace did, and the prompt tokens that cost.
struct MissReport {
  std::string reason;            // "" = none; tools_changed, system_changed,
                                 // messages_changed, template_rerender
  int index = -1;                // the tool / message that changed
  std::string change;            // messages_changed: edited, inserted, removed, reordered
  int64_t diverged_at = -1;      // first prompt token differing from the earlier request
  int64_t tokens = 0;            // computed tokens of parts unchanged since that request
};

// Recent requests' structure per namespace (bounded, least recently used out),
// thread-safe.
class StructureMemory {
 public:
  explicit StructureMemory(size_t per_namespace = 32) : per_ns_(per_namespace) {}
  // Compares with the remembered request sharing the longest token prefix.
  MissReport compare(const std::string& ns, const std::vector<int32_t>& ids,
                     const std::vector<RequestPart>& parts) const;
  void remember(const std::string& ns, std::vector<int32_t> ids, std::vector<RequestPart> parts);

 private:
  struct Entry {
    std::vector<int32_t> ids;
    std::vector<RequestPart> parts;
    uint64_t last_use = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Entry>> by_ns_;
  size_t per_ns_;
  uint64_t clock_ = 0;
};

}  // namespace pc::server
