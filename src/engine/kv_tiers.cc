#include "engine/kv_tiers.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "gguf/error.h"
#include "tier/disk_tier.h"
#include "tier/entry.h"
#include "tier/entry_key.h"
#include "tier/prefix_transfer.h"
#include "tier/redis_tier.h"
#include "tier/tier_worker.h"

namespace pc {

namespace {

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void log_error(const char* what, std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "promptcache: tier %s failed: %s\n", what, x.what());
  } catch (...) {
    std::fprintf(stderr, "promptcache: tier %s failed\n", what);
  }
}

}  // namespace

KvNamespace module_entry_ns(const KvNamespace& ns, uint64_t digest, size_t segment) {
  return KvNamespace{ns.model, ns.kv_type,
                     ns.tenant + "\x1fmodule:" + key_hex(digest) + ":" + std::to_string(segment)};
}

// One entry on its way to the tiers: the pages it reads stay referenced by `hold`
// until the completion releases them on the engine thread.
struct KvTiers::Write {
  KvNamespace ns;
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
  PageTable hold;
  uint64_t key = 0;
  // Filled by the worker.
  uint64_t bytes = 0;
  bool stored = false;
  explicit Write(PagePool& pool) : hold(pool) {}
};

KvTiers::KvTiers(const TierOptions& opt, PagePool& pool, RadixIndex& index)
    : opt_(opt), pool_(pool), index_(index) {
  if (!pool.storage()) throw Error("KV tiers need a page pool with storage");
  if (!opt.disk_dir.empty()) {
    DiskTierOptions d;
    d.capacity_bytes = opt.disk_bytes;
    d.fsync = opt.disk_fsync;
    disk_ = std::make_unique<DiskTier>(opt.disk_dir, d);
  }
  if (!opt.redis_url.empty()) {
    RedisTierOptions r;
    r.url = opt.redis_url;
    r.ttl_seconds = opt.redis_ttl_seconds;
    redis_ = std::make_unique<RedisTier>(r);
  }
  worker_ = std::make_unique<TierWorker>(1);
}

KvTiers::~KvTiers() {
  // The worker finishes queued writes (they read pages the Write objects keep
  // referenced); its unrun completions are dropped, releasing those references.
  worker_.reset();
}

size_t KvTiers::poll() { return worker_->poll(); }
bool KvTiers::wait(int timeout_ms) { return worker_->wait_ready(timeout_ms); }
size_t KvTiers::in_flight() const { return worker_->in_flight(); }

void KvTiers::flush() {
  while (worker_->in_flight() > 0) {
    worker_->wait_ready(100);
    worker_->poll();
  }
}

void KvTiers::promote_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t have,
                             std::function<void(int32_t)> done) {
  ++stats_.lookups;
  const KvShape shape = pool_.shape();
  auto query = std::make_shared<std::vector<int32_t>>(tokens.begin(), tokens.end());
  struct Found {
    TierLookup lookup;
    bool from_redis = false;
  };
  DiskTier* disk = disk_.get();
  RedisTier* redis = redis_.get();
  worker_->submit_value<Found>(
      [=]() {
        Found f;
        const int32_t min_length = have + 1;
        if (disk) f.lookup = disk->longest_prefix(ns, shape, *query, min_length);
        if (!f.lookup.hit() && redis) {
          f.lookup = redis->longest_prefix(ns, shape, *query, min_length);
          f.from_redis = f.lookup.hit();
          // Keep a local copy of what another server computed. An uncompressed
          // entry's bytes are its serialized form (deserialize_entry kept them).
          if (f.from_redis && disk && !f.lookup.entry.info.compressed) disk->put(f.lookup.entry.data);
        }
        return f;
      },
      [this, ns, done = std::move(done)](std::optional<Found>& f, std::exception_ptr e) {
        int32_t restored = 0;
        if (e) {
          ++stats_.errors;
          log_error("lookup", e);
        } else if (f && f->lookup.hit()) {
          restored = std::max(0, restore_prefix(pool_, index_, ns, f->lookup.entry));
          ++(f->from_redis ? stats_.redis_hits : stats_.disk_hits);
          stats_.promoted_tokens += restored;
        } else {
          ++stats_.misses;
        }
        if (done) done(restored);
      });
}

bool KvTiers::should_write(uint64_t key) {
  const int64_t now = now_seconds();
  if (written_.size() > 100000) written_.clear();
  auto it = written_.find(key);
  // Rewrite after half the Redis TTL, so entries in use do not expire there.
  if (it != written_.end() && now - it->second < std::max(1, opt_.redis_ttl_seconds / 2)) return false;
  if (worker_->in_flight() >= size_t(std::max(1, opt_.max_pending_writes))) {
    ++stats_.writes_skipped;
    return false;
  }
  written_[key] = now;  // also while in flight: a second save of the same entry is skipped
  return true;
}

void KvTiers::submit_write(std::shared_ptr<Write> w) {
  const KvStorage* kv = pool_.storage();
  DiskTier* disk = disk_.get();
  RedisTier* redis = redis_.get();
  worker_->submit(
      [w, kv, disk, redis] {
        const std::vector<uint8_t> bytes = serialize_entry(*kv, w->pages, w->tokens, w->ns);
        w->bytes = bytes.size();
        if (disk && disk->put(bytes) == TierStatus::kOk) w->stored = true;
        if (redis && redis->put(bytes) == TierStatus::kOk) w->stored = true;
      },
      [this, w](std::exception_ptr e) {
        w->hold.release();
        if (e) {
          ++stats_.errors;
          log_error("write", e);
        }
        if (w->stored) {
          ++stats_.writes;
          stats_.written_bytes += int64_t(w->bytes);
        } else {
          written_.erase(w->key);  // retried by the next save
          ++stats_.write_failures;
        }
      });
}

void KvTiers::save_prefix(const KvNamespace& ns, std::span<const int32_t> tokens) {
  const int32_t P = pool_.page_size();
  if (int32_t(tokens.size()) < P) return;
  // Entries are page-aligned prefixes (tier/entry_key.h): cut before snapshotting.
  const std::span<const int32_t> aligned = tokens.first(tokens.size() / P * P);
  const uint64_t key = entry_key(ns, pool_.shape(), aligned);
  if (!should_write(key)) return;
  PrefixSnapshot snap = snapshot_prefix(pool_, index_, ns, aligned, true);
  if (int32_t(snap.tokens.size()) != int32_t(aligned.size())) return;  // not all cached (evicted)
  auto w = std::make_shared<Write>(pool_);
  w->ns = ns;
  w->key = key;
  w->tokens = std::move(snap.tokens);
  w->pages = std::move(snap.pages);
  w->hold = std::move(snap.table);
  submit_write(std::move(w));
}

void KvTiers::save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const ModuleEntry& entry) {
  for (size_t i = 0; i < entry.segments.size(); ++i) {
    const ModuleSegment& seg = entry.segments[i];
    const KvNamespace sns = module_entry_ns(ns, digest, i);
    const std::span<const int32_t> toks = tokens.subspan(seg.tok_begin, seg.tok_end - seg.tok_begin);
    const uint64_t key = entry_key(sns, pool_.shape(), toks);
    if (!should_write(key)) continue;
    auto w = std::make_shared<Write>(pool_);
    w->ns = sns;
    w->key = key;
    w->tokens.assign(toks.begin(), toks.end());
    w->hold.attach(seg.entries);
    for (const PageEntry& e : seg.entries) w->pages.push_back(e.page);
    submit_write(std::move(w));
  }
}

bool KvTiers::load_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const Segments& segments, ModuleEntry* out, std::vector<PageTable>* hold) {
  const KvShape shape = pool_.shape();
  std::vector<Entry> found;
  int64_t disk_hits = 0, redis_hits = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const KvNamespace sns = module_entry_ns(ns, digest, i);
    const auto toks = tokens.subspan(segments[i].first, segments[i].second - segments[i].first);
    TierLookup r;
    if (disk_) r = disk_->get(sns, shape, toks);
    if (r.hit()) {
      ++disk_hits;
    } else if (redis_) {
      r = redis_->get(sns, shape, toks);
      if (r.hit()) {
        ++redis_hits;
        if (disk_ && !r.entry.info.compressed) disk_->put(r.entry.data);
      }
    }
    if (!r.hit()) return false;  // all segments or nothing
    found.push_back(std::move(r.entry));
  }
  ModuleEntry e;
  std::vector<PageTable> tables;
  for (size_t i = 0; i < found.size(); ++i) {
    PageTable t(pool_);
    if (!restore_pages(pool_, found[i], t)) return false;  // out of KV memory
    ModuleSegment seg{segments[i].first, segments[i].second, {}};
    seg.entries.assign(t.entries().begin(), t.entries().end());
    e.segments.push_back(std::move(seg));
    tables.push_back(std::move(t));
  }
  stats_.disk_hits += disk_hits;
  stats_.redis_hits += redis_hits;
  ++stats_.module_loads;
  stats_.promoted_tokens += int64_t(tokens.size());
  for (PageTable& t : tables) hold->push_back(std::move(t));
  *out = std::move(e);
  return true;
}

TierEntryOwner tier_entry_owner(const KvNamespace& ns) {
  const size_t cut = ns.tenant.find('\x1f');
  if (cut == std::string::npos) return {ns.tenant, false};
  return {ns.tenant.substr(0, cut), true};
}

void KvTiers::load_module_async(const KvNamespace& ns, uint64_t digest, std::vector<int32_t> tokens,
                                Segments segments, std::function<void(RestoredModule*)> done) {
  // Synchronous for now: looked up and restored here, done() called at once.
  ModuleEntry e;
  std::vector<PageTable> hold;
  if (!load_module(ns, digest, tokens, segments, &e, &hold)) return done(nullptr);
  RestoredModule r(pool_);
  for (ModuleSegment& seg : e.segments) {
    r.segments.push_back(seg.entries);
    r.hold.attach(seg.entries);
  }
  hold.clear();
  done(&r);
}

}  // namespace pc
