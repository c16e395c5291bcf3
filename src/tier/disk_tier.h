// Disk tier: one file per entry under a cache directory; survives restarts.
//
//   DIR/.lock                  flock()ed while a DiskTier has the directory open
//   DIR/<key hex>.kv           one entry (tier/entry.h format) under its key (tier/entry_key.h)
//   DIR/<key hex>.keep         its lifetime, when put() gave one: the unix second it is kept
//                              until, as decimal text (written atomically, like entries)
//   DIR/.<key hex>.<n>.part    a write in progress (removed at startup: a crash mid-write)
//
// Writes are atomic: the entry goes to a temporary file in the same directory, is
// fsync()ed, then renamed over its final name (and the directory fsync()ed), so a
// reader or a restart sees either the whole entry or none.
//
// Index. An in-memory map key → (bytes, tokens, namespace) and an LRU list, rebuilt at
// startup by reading each file's header only: a file whose header fails its checksum,
// whose size differs from what the header says (truncated) or whose name is not the
// key of its contents is deleted and counted. The payload checksum is verified on
// get(); an entry failing it is deleted and reported as a miss. LRU order survives a
// restart through file mtimes: a hit touches its file.
//
// Capacity is the sum of entry file sizes. put() evicts least recently used files to
// make room, skipping entries whose lifetime (put's keep_seconds, kept in a .keep file
// beside the entry so that a restart keeps it) has not run out; when those fill the
// capacity, put() gives up with kNoSpace.
//
// Chains. A chain's links are marked used tail first (read_chain, touch_chain), and a
// restart orders entries of equal mtime by start, later links older; so LRU eviction
// takes a chain's tail before its root and never a link whose successors remain (a
// shared root is touched by every chain through it). A link deleted as corrupt leaves its
// successors stored and counted, unreachable until write-through writes the link again
// (it writes the links a tier lacks) or LRU reaches them. A write that fails with ENOSPC/EDQUOT (the disk is full before the
// capacity is) evicts at least the entry's size more and retries once, then gives up
// with kNoSpace; nothing is left behind and nothing throws.
//
// Prefix lookup: see tier/entry_key.h (candidate lengths, longest first).
//
// Thread-safe: every call holds one mutex (the tier is meant to be driven from a
// TierWorker thread, off the engine thread). One process per directory (the lock).
//
// stats(): entries, bytes, capacity_bytes; errors = I/O errors; counters "evicted"
// (for capacity), "enospc_retries" (writes retried after a full disk), "temp_removed"
// (leftover temporary files removed at startup), "io_errors" (= errors).
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tier/entry.h"
#include "tier/entry_key.h"
#include "tier/kv_tier.h"
#include "tier/tier_result.h"

namespace pc {

struct DiskTierOptions {
  uint64_t capacity_bytes = uint64_t(50) << 30;
  bool fsync = true;  // fsync file and directory on every put (off: faster, not crash-safe)
  // Fault injection for tests: called before each temporary file is written with the
  // entry size; a nonzero return fails that write with that errno (e.g. ENOSPC).
  std::function<int(uint64_t bytes)> inject_write_error;
};

class DiskTier final : public KvTier {
 public:
  // Opens `dir` (created if missing) and rebuilds the index. Throws pc::Error when the
  // directory cannot be created or opened, or another process holds it.
  DiskTier(std::string dir, uint64_t capacity_bytes);
  DiskTier(std::string dir, DiskTierOptions opt);
  ~DiskTier() override;
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Stores a serialized entry (serialize_entry output) under the key of its namespace,
  // shape and tokens. An entry already present is only marked recently used.
  TierStatus put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds = 0) override;

  // The entry of exactly `tokens`.
  TierLookup get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) override;
  // The entry covering the longest prefix of `tokens` (of at least min_length tokens).
  TierChain read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                       std::span<const ChainLink> links) override;
  TierLookup get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                       std::span<const int32_t> tokens, uint64_t state_bytes) override;
  std::vector<char> has(std::span<const uint64_t> keys) override;
  void touch_chain(std::span<const uint64_t> keys_root_first) override;
  bool contains(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) const;
  bool erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens);
  bool erase_key(uint64_t key);

  const char* name() const override { return "disk"; }
  using Item = TierItem;
  bool listable() const override { return true; }
  // Every entry, most recently used first.
  std::vector<Item> list() const override;
  bool read_item(uint64_t key, std::vector<uint8_t>* bytes) override;
  TierStats stats() const override;
  const std::string& dir() const { return dir_; }
  std::string path_of(uint64_t key) const;
  std::string keep_path_of(uint64_t key) const;

 private:
  struct Slot {
    Item item;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  void scan();
  bool load_header(const std::string& path, uint64_t key_from_name, Item* item);
  // Reads and validates the entry of `key`, expected to be `link` of ns with `tokens`;
  // deletes it when invalid. Does not mark it used. state_bytes: a state entry's.
  TierLookup read_entry(uint64_t key, const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                        std::span<const int32_t> tokens, uint64_t state_bytes = 0);
  // The lifetime stored beside an entry (0: none or unreadable) and writing one.
  int64_t read_keep(uint64_t key) const;
  void write_keep(uint64_t key, int64_t keep_until);
  int write_file(uint64_t key, std::span<const uint8_t> bytes);  // 0 or errno
  bool evict_one();
  void evict_to(uint64_t target_bytes);
  void remove(uint64_t key, bool count_corrupt);
  void touch(uint64_t key, bool touch_file);

  // puts: entries written; put_failures: puts that stored nothing (no space, I/O
  // error); corrupt_deleted: invalid files deleted (startup scan or get);
  // bytes_read: lookups and read_item
  struct Counters : TierTraffic {
    int64_t enospc_retries = 0;   // writes retried after a full disk
    int64_t evicted = 0;          // entries evicted for capacity
    int64_t temp_removed = 0;     // leftover temporary files removed at startup
    int64_t io_errors = 0;
  };

  std::string dir_;
  DiskTierOptions opt_;
  int lock_fd_ = -1;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Slot> items_;
  std::list<uint64_t> lru_;  // front = most recently used
  uint64_t bytes_ = 0;
  int64_t tokens_ = 0;  // sum of items' n_tokens
  uint64_t temp_seq_ = 0;
  Counters stats_;
};

}  // namespace pc
