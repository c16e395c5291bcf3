// The block index: where the KV of a block — the tokens of one part of a request (a
// tool definition, a message) — sits in the prefix tree, whatever its position.
//
//   request A:  [system][tool 1][tool 2][user 1]         blocks registered at finish
//   request B:  [system][tool 2][user 1]                 tool 1 removed: the prefix
//                        ^ exact prefix ends here         ends after [system]; [tool 2]
//                                                        and [user 1] are found here at
//                                                        positions A gave them
//
// The KV itself lives in the radix tree; an entry records the anchor of the sequence it
// was part of (RadixIndex::Anchor) and the depth it starts at. Lookups re-check the
// anchor against the live tree (node alive, same generation, same tokens on its path),
// so an evicted or expired block is never returned and its entry is dropped then;
// pins keep blocks findable because they keep their nodes. Keys hash the namespace with
// the tokens, and the anchor must lie in that namespace's tree: namespaces never mix.
//
// Engine thread only.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_namespace.h"
#include "kv/radix_index.h"

namespace pc {

struct BlockHit {
  int32_t position = 0;            // depth (= position) the block's KV was computed at
  std::vector<PageSlice> slices;   // its KV, in token order
};

class BlockIndex {
 public:
  // Bounds: locations kept per distinct block, and distinct blocks in all.
  static constexpr size_t kPerBlock = 4;
  static constexpr size_t kMaxBlocks = 1 << 16;

  // Records that `tokens`, at depth `begin` of the cached sequence ending at `a`, are a
  // block. A location already recorded is not added twice.
  void add(const KvNamespace& ns, std::span<const int32_t> tokens, RadixIndex::Anchor a, int32_t begin);
  // A live location of the block, the most recently recorded first; drops stale ones.
  std::optional<BlockHit> find(const RadixIndex& index, const KvNamespace& ns, std::span<const int32_t> tokens);
  size_t size() const { return map_.size(); }

 private:
  struct Location {
    RadixIndex::Anchor anchor;
    int32_t begin = 0;
    int32_t length = 0;
  };
  static uint64_t key(const KvNamespace& ns, std::span<const int32_t> tokens);
  std::unordered_map<uint64_t, std::vector<Location>> map_;
};

}  // namespace pc
