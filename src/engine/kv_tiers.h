// The engine's link to the KV tiers below memory: the disk tier and the shared Redis
// tier (src/tier, docs/tiers.md).
//
//   memory (radix index, module store)
//     │  write-through when a sequence finishes / a module is encoded   (worker thread)
//     ▼
//   disk  ──►  Redis                 both get every entry; Redis is shared by servers
//     ▲
//     │  promotion: a prompt's longest prefix (or a module) found below memory is
//     │  restored into fresh pages and inserted into the index / module store
//
// Why write-through rather than write-on-eviction: an entry must be in Redis before
// another server can reuse it, and on disk before a crash or restart, which eviction
// may never precede; and an eviction has to free pages at once, while serialization
// would have to keep them. Eviction from memory therefore never loses an entry that
// reached a lower tier. Writes are skipped, not queued without bound, when more than
// max_pending_writes are in flight, and an entry already written is not written again.
//
// Threads. Everything here is called on the engine thread. Lookups, serialization and
// I/O run on a TierWorker thread; their completions run in poll() on the engine thread,
// which is the only place the page pool, index and module store are touched. While a
// write is in flight its snapshot holds sequence references on the pages it reads, so
// they cannot be freed or reused (the slots read are below their fill: read-only).
//
// Prefix promotion is asynchronous: the request waits, other sequences keep stepping.
// Module loads are synchronous (like module encoding, which runs in add_plan).
//
// Module entries use the entry format of prefixes. Each segment of a module (a run of
// its tokens starting on a fresh page, see kv/module_store.h) is one entry whose
// namespace tenant is "<tenant>\x1fmodule:<digest>:<segment>": the digest covers the
// module's content, context and positions, so the key cannot meet a prefix's.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "kv/module_store.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/radix_index.h"

namespace pc {

class DiskTier;
class RedisTier;
class TierWorker;
struct DiskTierStats;
struct RedisTierStats;

struct KvTierStats {
  int64_t lookups = 0;           // prefix promotions asked
  int64_t disk_hits = 0;         // prefix and module-segment entries found on disk
  int64_t redis_hits = 0;        // ... found in Redis (and not on disk)
  int64_t misses = 0;            // lookups that found nothing longer than memory had
  int64_t promoted_tokens = 0;   // tokens restored into memory
  int64_t module_loads = 0;      // modules restored from a tier
  int64_t writes = 0;            // entries written (to at least one tier)
  int64_t write_failures = 0;    // entries no tier stored
  int64_t writes_skipped = 0;    // write-through skipped: too many writes in flight
  int64_t written_bytes = 0;
  int64_t errors = 0;            // exceptions in worker jobs (logged, never fatal)
};

// A module restored from a tier: each segment's pages, kept alive by `hold` until the
// caller stored them.
struct RestoredModule {
  explicit RestoredModule(PagePool& pool) : hold(pool) {}
  std::vector<std::vector<PageEntry>> segments;
  PageTable hold;
};

class KvTiers {
 public:
  // Opens the configured tiers. Throws pc::Error for a disk directory that cannot be
  // used or a malformed Redis URL; an unreachable Redis is not an error (it is retried).
  KvTiers(const TierOptions& opt, PagePool& pool, RadixIndex& index);
  ~KvTiers();  // finishes the writes already queued
  KvTiers(const KvTiers&) = delete;
  KvTiers& operator=(const KvTiers&) = delete;

  // Looks for a prefix of `tokens` longer than `have` (the tokens memory already
  // has) in the disk tier, then Redis; restores what it finds into the index and
  // calls done(tokens restored, 0 when nothing) from poll().
  void promote_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t have,
                      std::function<void(int32_t)> done);
  // Writes the longest page-aligned cached prefix of `tokens` to every tier, in the
  // background.
  void save_prefix(const KvNamespace& ns, std::span<const int32_t> tokens);

  // A module's segments: [begin, end) ranges of its own tokens.
  using Segments = std::vector<std::pair<int32_t, int32_t>>;
  // Restores a module from the tiers into fresh pages, synchronously. On success fills
  // `out` (segments with their pages) and appends the tables holding the pages'
  // sequence references to `hold` (the caller releases them once the entry is stored).
  bool load_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                   const Segments& segments, ModuleEntry* out, std::vector<PageTable>* hold);
  // The asynchronous form: lookups on the worker thread, pages restored and done()
  // called on the engine thread (poll()); done(nullptr) when some segment is in no
  // tier or no KV memory is left to restore into.
  void load_module_async(const KvNamespace& ns, uint64_t digest, std::vector<int32_t> tokens,
                         Segments segments, std::function<void(RestoredModule*)> done);
  // Writes an encoded module's segments to every tier, in the background.
  void save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                   const ModuleEntry& entry);

  // Runs finished jobs' completions (engine thread). Returns how many ran.
  size_t poll();
  // Waits up to timeout_ms for a completion to be ready.
  bool wait(int timeout_ms);
  // Waits for every job and runs its completion.
  void flush();
  size_t in_flight() const;

  KvTierStats stats() const { return stats_; }
  const DiskTier* disk() const { return disk_.get(); }
  const RedisTier* redis() const { return redis_.get(); }
  const TierOptions& options() const { return opt_; }

 private:
  struct Write;
  bool should_write(uint64_t key);
  void submit_write(std::shared_ptr<Write> w);

  TierOptions opt_;
  PagePool& pool_;
  RadixIndex& index_;
  std::unique_ptr<DiskTier> disk_;
  std::unique_ptr<RedisTier> redis_;
  std::unordered_map<uint64_t, int64_t> written_;  // entry key → when written (s)
  KvTierStats stats_;
  std::unique_ptr<TierWorker> worker_;  // last: stops (finishing writes) before the tiers go
};

// The namespace of a module segment's entry (see above).
KvNamespace module_entry_ns(const KvNamespace& ns, uint64_t digest, size_t segment);

// Whose a tier entry is: the tenant, and whether it is a module segment.
struct TierEntryOwner {
  std::string tenant;
  bool module_segment = false;
};
TierEntryOwner tier_entry_owner(const KvNamespace& entry_ns);

}  // namespace pc
