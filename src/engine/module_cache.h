// The module cache: encoded modules' KV (kv/module_store.h) for the engine, with the
// module's cache policy (pin, TTL), write-through to the tiers, RoPE-relocated copies,
// and the bookkeeping of modules being encoded or loaded.
//
// Encoding is not done here: a missing module becomes an encoding sequence that the
// engine batches with everything else (engine.h); its result is store()d here. A
// module found in a lower tier is restored asynchronously (KvTiers) and stored the
// same way. While either is under way the module is `pending`, so concurrent requests
// for it wait for the one encoding instead of starting another.
//
// Page ownership: entries hold cache references; everything handed to a sequence is
// attached to a PageTable the caller owns (its hold), so eviction never pulls pages
// from under a sequence.
//
// Engine thread only.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/cache_report.h"

#include "kv/kv_namespace.h"
#include "kv/kv_plan.h"
#include "kv/module_store.h"
#include "kv/page_table.h"

namespace pc {

class KvStorage;
class KvTiers;
class Model;

class ModuleCache {
 public:
  ModuleCache(PagePool& pool, const Model& model);
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  // Writes modules through to `tiers`, and writes the stored ones again when a tier
  // lost its entries.
  void set_tiers(KvTiers* tiers);

  // The module as encoded (shift 0), or null. Counts nothing.
  const ModuleEntry* peek(const KvNamespace& ns, const ModuleSpec& spec) const;
  // Records a request's use of a stored module (hit counts, LRU).
  void use(const KvNamespace& ns, const ModuleSpec& spec);
  // Stores a module's segments (encoded or restored from a tier) with the spec's policy;
  // writes an encoded module through to the tiers.
  void store(const KvNamespace& ns, const ModuleSpec& spec, ModuleEntry entry, bool write_through);

  // Appends to `out` the KV of the module's own tokens [begin, end) used `shift`
  // positions after where they were encoded, and attaches those pages to `hold`.
  // [begin, end) covers whole segments, except that a context reference (begin 0,
  // shift 0) may end inside one. Relocated copies (shift != 0) are made once and
  // cached under the shift. Returns false when the module is not stored or no page is
  // left to relocate into (nothing appended then).
  bool take(const KvNamespace& ns, const ModuleSpec& spec, int32_t begin, int32_t end, int32_t shift,
            PageTable& hold, std::vector<PageEntry>& out);

  // Modules being encoded (by the sequence `encoder`) or restored from a tier.
  struct Pending {
    bool loading = false;   // a tier lookup is under way
    int64_t encoder = 0;    // the encoding sequence's id (0: none)
  };
  Pending* pending(const KvNamespace& ns, uint64_t digest);
  void set_pending(const KvNamespace& ns, uint64_t digest, Pending p) { pending_[{ns, digest, 0}] = p; }
  void clear_pending(const KvNamespace& ns, uint64_t digest) { pending_.erase({ns, digest, 0}); }

  // Drops a module and every relocated copy of it; tier copies (keyed by content) stay.
  int drop(const KvNamespace& ns, uint64_t digest) { return store_.erase_digest(ns, digest); }

  ModuleStore& store() { return store_; }
  const ModuleStore& store() const { return store_; }

  // Frees at least `bytes` of unpinned modules, least recently used first (the page
  // pool's reclaimer).
  size_t reclaim(size_t bytes) { return store_.evict(bytes); }

  // The admin face (engine/module_cache_admin.cc, composed by engine/cache_admin.h):
  // plain data in and out.
  ModuleCounters counters() const;
  std::vector<CacheScope> scopes(const std::string& model) const;
  std::vector<ModuleEntryView> entries(const KvNamespace& ns) const;
  // One module entry by its listing id (ModuleEntryView::id): kRefused evicting a
  // pinned one.
  EntryResult entry_op(const KvNamespace& ns, const std::string& id, EntryOp op, size_t* freed);
  size_t evict(size_t bytes) { return store_.evict(bytes); }
  // Unpinned modules of `model` in the scopes `mine` accepts, least recently used first.
  size_t evict_scopes(const std::string& model, const std::function<bool(const CacheScope&)>& mine, size_t bytes);
  size_t evict_expired(ModuleEntry::Clock::time_point now) { return store_.evict_expired(now); }
  // Each page a pinned module holds, by its tenant.
  void visit_pinned(const std::function<void(const std::string& tenant, int32_t page)>& fn) const;

 private:
  bool relocated(const KvNamespace& ns, const ModuleSpec& spec, const ModuleSegment& seg, int32_t shift,
                 PageTable& held, std::vector<PageEntry>& out);
  void apply_policy(const ModuleSpec& spec, ModuleEntry& e) const;

  PagePool& pool_;
  const Model& model_;
  ModuleStore store_;
  KvTiers* tiers_ = nullptr;
  std::map<ModuleKey, Pending> pending_;  // shift 0 keys
};

}  // namespace pc
