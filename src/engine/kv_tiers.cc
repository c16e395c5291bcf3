#include "engine/kv_tiers.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "common/error.h"
#include "engine/prefix_cache.h"
#include "kv/module_store.h"
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

// Ranges outside the module's tokens are a caller's bug: fail before any I/O.
void check_segments(const KvTiers::Segments& segments, size_t n_tokens) {
  for (const auto& [b, e] : segments)
    if (b < 0 || b > e || size_t(e) > n_tokens)
      throw std::invalid_argument("module segment [" + std::to_string(b) + ", " + std::to_string(e) +
                                  ") is outside its " + std::to_string(n_tokens) + " tokens");
}

}  // namespace

KvNamespace module_entry_ns(const KvNamespace& ns, uint64_t digest, size_t segment) {
  return ns.module_segment(digest, int32_t(segment));
}

// Entries on their way to the tiers: one unchained entry (a module segment, a block)
// or the links [first, end) of a prefix's chain. The pages read stay referenced by
// `hold` until the completion releases them on the engine thread.
struct KvTiers::Write {
  KvNamespace ns;
  std::vector<int32_t> tokens;   // the entry's tokens; a chain: the whole prefix [0, links × P)
  std::vector<int32_t> pages;    // the pages to read: the entry's, or a chain's links [first, end)
  std::vector<ChainLink> links;  // a chain: every link of the prefix, root first; else empty
  size_t first = 0;              // a chain: the first link to write (those before were written)
  PageTable hold;
  uint64_t key = 0;              // an unchained entry's key
  int64_t keep_seconds = 0;      // KvTier::put
  std::vector<float> state;      // a state entry: the state (pages[0]: the page it ends in)
  LinkPos link;                  // a state entry's place (its own tokens: `tokens`)
  // Filled by the worker.
  uint64_t bytes = 0;         // bytes of the entries some tier stored
  int64_t stored = 0;         // entries some tier stored
  int64_t present = 0;        // chain links every tier already had (not written)
  int64_t failed = 0;         // entries that no tier stored
  explicit Write(PagePool& pool) : hold(pool) {}
  bool chain() const { return !links.empty(); }
  size_t n_pages() const { return pages.size(); }
};

namespace {

std::vector<std::unique_ptr<KvTier>> open_tiers(const TierOptions& opt) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  if (!opt.disk_dir.empty()) {
    DiskTierOptions d;
    d.capacity_bytes = opt.disk_bytes;
    d.fsync = opt.disk_fsync;
    tiers.push_back(std::make_unique<DiskTier>(opt.disk_dir, d));
  }
  if (!opt.redis_url.empty()) {
    RedisTierOptions r;
    r.url = opt.redis_url;
    r.ttl_seconds = opt.redis_ttl_seconds;
    tiers.push_back(std::make_unique<RedisTier>(r));
  }
  return tiers;
}

}  // namespace

KvTiers::KvTiers(const TierOptions& opt, PagePool& pool, PrefixCache& prefix)
    : KvTiers(open_tiers(opt), opt, pool, prefix) {}

KvTiers::KvTiers(std::vector<std::unique_ptr<KvTier>> tiers, const TierOptions& opt, PagePool& pool,
                 PrefixCache& prefix)
    : opt_(opt), pool_(pool), prefix_(prefix), tiers_(std::move(tiers)) {
  if (!pool.store()) throw Error("KV tiers need a page pool with a page store");
  for (const auto& t : tiers_)
    if (!t) throw Error("KV tiers: a null tier");
  stats_.hits.assign(tiers_.size(), 0);
  generations_.assign(tiers_.size(), 0);
  worker_ = std::make_unique<TierWorker>(1);
}

KvTiers::~KvTiers() {
  // The worker finishes queued writes (they read pages the Write objects keep
  // referenced); its unrun completions are dropped, releasing those references.
  // Deferred writes are queued first, so that none is lost.
  while (!deferred_.empty()) {
    start_write(std::move(deferred_.front()));
    deferred_.pop_front();
  }
  worker_.reset();
}

size_t KvTiers::poll() {
  const size_t n = worker_->poll();
  pump();
  return n;
}
bool KvTiers::wait(int timeout_ms) { return worker_->wait_ready(timeout_ms); }
size_t KvTiers::in_flight() const { return worker_->in_flight(); }

void KvTiers::flush() {
  pump();
  while (worker_->in_flight() > 0 || !deferred_.empty() || !copies_.empty()) {
    worker_->wait_ready(100);
    poll();  // completions, then the next deferred writes and copies
  }
}

std::vector<const KvTier*> KvTiers::tiers() const {
  std::vector<const KvTier*> out;
  for (const auto& t : tiers_) out.push_back(t.get());
  return out;
}

std::vector<TierStats> KvTiers::tier_stats() const {
  std::vector<TierStats> out;
  for (const auto& t : tiers_) out.push_back(t->stats());
  return out;
}

TierLookup KvTiers::find(const std::function<TierLookup(KvTier&)>& probe, int* tier) {
  *tier = -1;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    TierLookup r = probe(*tiers_[i]);
    if (!r.hit()) continue;
    *tier = int(i);
    // Keep a copy in every faster tier (e.g. the disk gets what another server put in
    // Redis). An uncompressed entry's bytes are its serialized form (kv_tier.h); a
    // compressed one would need serializing again, which is not worth it here.
    if (!r.entry.info.compressed)
      for (size_t j = 0; j < i; ++j) tiers_[j]->put(r.entry.data);
    return r;
  }
  return {};
}

void KvTiers::promote_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t have,
                             std::function<void(int32_t)> done, int32_t have_state) {
  ++stats_.lookups;
  const KvShape shape = pool_.shape();
  const int32_t P = pool_.page_size();
  auto query = std::make_shared<std::vector<int32_t>>(tokens.begin(), tokens.end());
  // Memory's whole pages are kept; the chain is read from the link `have` falls in.
  const size_t first = size_t(std::max(0, have) / P);
  const uint64_t state_bytes = have_state >= 0 ? uint64_t(prefix_.state_floats()) * sizeof(float) : 0;
  struct Found {
    std::vector<Entry> links;     // links [first, first + size) of the chain
    std::vector<int64_t> by_tier;  // [tier]: links it supplied
    Entry state;                   // a state entry, when state_at > 0
    int32_t state_at = 0;          // the tokens the state follows
    int state_tier = -1;
    uint64_t state_key = 0;
  };
  worker_->submit_value<Found>(
      [this, ns, shape, query, first, have_state, state_bytes]() {
        Found f;
        f.by_tier.assign(tiers_.size(), 0);
        const std::vector<ChainLink> links = chain_links(ns, shape, *query);
        std::vector<uint64_t> keys;
        for (const ChainLink& l : links) keys.push_back(l.key);
        size_t next = first;
        // Down the tiers, each continuing where the faster ones stopped; what a slower
        // tier supplies is copied into the faster ones (e.g. the disk gets what another
        // server put in Redis).
        for (size_t i = 0; i < tiers_.size() && next < links.size(); ++i) {
          TierChain c = tiers_[i]->read_chain(ns, shape, *query, std::span(links).subspan(next));
          if (!c.hit()) continue;
          for (size_t j = 0; j < i; ++j) {
            for (const Entry& e : c.links)
              if (!e.info.compressed) tiers_[j]->put(e.data);
            tiers_[j]->touch_chain(std::span(keys).first(next + c.links.size()));
          }
          f.by_tier[i] += int64_t(c.links.size());
          next += c.links.size();
          for (Entry& e : c.links) f.links.push_back(std::move(e));
        }
        if (state_bytes > 0) find_state(ns, shape, *query, int32_t(next) * pool_.page_size(), have_state, state_bytes,
                                        &f.state, &f.state_at, &f.state_tier, &f.state_key);
        return f;
      },
      [this, ns, query, first, P, have_state, done = std::move(done)](std::optional<Found>& f, std::exception_ptr e) {
        int32_t restored = 0;
        if (e) {
          ++stats_.errors;
          log_error("lookup", e);
          if (done) done(0);
          return;
        }
        const bool found_state = f && f->state_at > 0;
        if (f && f->links.empty() && !found_state) {
          ++stats_.misses;
        } else if (f && !f->links.empty()) {
          const size_t end = (first + f->links.size()) * size_t(P);
          restored = std::max(0, prefix_.restore_chain(ns, std::span(*query).first(end), int32_t(first) * P, f->links));
          for (size_t i = 0; i < f->by_tier.size(); ++i)
            if (f->by_tier[i] > 0) ++stats_.hits[i];
          stats_.links_read += int64_t(f->links.size());
          stats_.promoted_tokens += restored;
          // What was just read is in the tiers: write-through need not check it again.
          const std::vector<ChainLink> links = chain_links(ns, pool_.shape(), std::span(*query).first(end));
          for (const ChainLink& l : links) written_[l.key] = now_seconds();
        }
        if (found_state) {
          const int32_t added =
              prefix_.restore_state(ns, std::span(*query).first(size_t(f->state_at)), f->state);
          if (added >= 0) {
            ++stats_.states_read;
            stats_.state_bytes_read += int64_t(f->state.info.total_bytes());
            if (f->state_tier >= 0 && f->links.empty()) ++stats_.hits[size_t(f->state_tier)];
            stats_.promoted_tokens += added;
            written_[f->state_key] = now_seconds();
            // The resume point moved from memory's latest snapshot to this one.
            restored = std::max(restored + added, f->state_at - std::max(0, have_state));
          }
        }
        if (done) done(restored);
      });
}

void KvTiers::find_state(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> query,
                         int32_t avail, int32_t have_state, uint64_t state_bytes, Entry* out, int32_t* at,
                         int* tier, uint64_t* key) {
  // A state entry at p holds the KV of [start, p) (start = state_link_start(p)); the
  // pages before start must be memory's or the walk's: p <= avail + P. The latest
  // such p after memory's own snapshot is wanted; candidates are asked for with
  // KvTier::has (an index look on the disk, pipelined EXISTS on Redis) in batches,
  // latest first, so a conversation's next turn finds its snapshot in the first batch.
  const int32_t P = shape.page_size;
  const int32_t q = int32_t(query.size());
  const int32_t hi = std::min(q, avail + P);
  if (hi <= have_state) return;
  const std::vector<ChainHash> bounds =
      chain_bounds(ns, shape, query.first(size_t(state_link_start(hi, P))));
  constexpr int32_t kBatch = 256;
  for (int32_t top = hi; top > have_state; top -= kBatch) {
    const int32_t bottom = std::max(have_state, top - kBatch);  // probes p in (bottom, top]
    std::vector<uint64_t> keys;
    for (int32_t p = top; p > bottom; --p) {
      const int32_t s = state_link_start(p, P);
      keys.push_back(state_key(ns, shape, bounds[size_t(s / P)], query.subspan(size_t(s), size_t(p - s))));
    }
    std::vector<char> any(keys.size(), 0);
    for (const auto& t : tiers_) {
      const std::vector<char> h = t->has(keys);
      for (size_t i = 0; i < any.size() && i < h.size(); ++i) any[i] = char(any[i] | h[i]);
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!any[i]) continue;
      const int32_t p = top - int32_t(i);
      const int32_t s = state_link_start(p, P);
      const LinkPos link{s, bounds[size_t(s / P)]};
      const auto own = query.subspan(size_t(s), size_t(p - s));
      int found = -1;
      TierLookup r = find([&](KvTier& t) { return t.get_state(ns, shape, link, own, state_bytes); }, &found);
      if (!r.hit()) continue;  // invalid (deleted) or gone meanwhile: an earlier one may do
      *out = std::move(r.entry);
      *at = p;
      *tier = found;
      *key = keys[i];
      return;
    }
  }
}

void KvTiers::save_state(const KvNamespace& ns, std::span<const int32_t> tokens, std::span<const float> state,
                         int64_t keep_seconds) {
  const int32_t P = pool_.page_size();
  const int32_t p = int32_t(tokens.size());
  if (p <= 0 || state.empty()) return;
  const int32_t start = state_link_start(p, P);
  const std::vector<ChainHash> bounds = chain_bounds(ns, pool_.shape(), tokens.first(size_t(start)));
  const LinkPos link{start, bounds.back()};
  const std::span<const int32_t> own = tokens.subspan(size_t(start));
  const uint64_t key = state_key(ns, pool_.shape(), link.parent, own);
  if (keep_seconds <= 0 && recently_written(key)) return;
  PrefixSnapshot snap = prefix_.snapshot(ns, tokens, false);
  if (int32_t(snap.tokens.size()) < p) return;  // not all cached (evicted)
  auto w = std::make_shared<Write>(pool_);
  w->ns = ns;
  w->key = key;
  w->link = link;
  w->keep_seconds = keep_seconds;
  w->tokens.assign(own.begin(), own.end());
  w->state.assign(state.begin(), state.end());
  // The page is held until written (its slots up to p are below its fill: read-only);
  // the worker serializes, so the engine thread only copies the state.
  w->pages.push_back(snap.pages[size_t(start / P)]);
  w->hold.attach(snap.table.entries().subspan(size_t(start / P), 1));
  snap.table.release();
  written_[key] = now_seconds();
  submit_write(std::move(w));
}

bool KvTiers::recently_written(uint64_t key) const {
  auto it = written_.find(key);
  // Written again after half the Redis TTL, so entries in use do not expire there.
  return it != written_.end() && now_seconds() - it->second < std::max(1, opt_.redis_ttl_seconds / 2);
}

bool KvTiers::should_write(uint64_t key) {
  if (written_.size() > 1000000) written_.clear();
  if (recently_written(key)) return false;
  written_[key] = now_seconds();  // also while in flight: a second save of the same entry is skipped
  return true;
}

size_t KvTiers::max_pending() const { return size_t(std::max(1, opt_.max_pending_writes)); }

int64_t KvTiers::max_deferred_pages() const { return std::max<int64_t>(1, int64_t(pool_.n_pages()) / 4); }

void KvTiers::forget(const Write& w) {
  if (!w.chain()) {
    written_.erase(w.key);
    return;
  }
  for (size_t i = w.first; i < w.links.size(); ++i) written_.erase(w.links[i].key);
}

void KvTiers::submit_write(std::shared_ptr<Write> w) {
  if (worker_->in_flight() < max_pending() && deferred_.empty()) {
    start_write(std::move(w));
    return;
  }
  const int64_t pages = int64_t(w->pages.size());
  if (deferred_pages_ + pages > max_deferred_pages()) {
    // Holding more pages would keep too much KV memory from reuse: this one is dropped,
    // and counted (the next save of the entry tries again).
    ++stats_.writes_skipped;
    forget(*w);
    return;  // w's hold goes with it
  }
  deferred_pages_ += pages;
  ++stats_.writes_deferred;
  deferred_.push_back(std::move(w));
}

void KvTiers::pump() {
  while (!deferred_.empty() && worker_->in_flight() < max_pending()) {
    std::shared_ptr<Write> w = std::move(deferred_.front());
    deferred_.pop_front();
    deferred_pages_ -= int64_t(w->pages.size());
    start_write(std::move(w));
  }
  while (!copies_.empty() && worker_->in_flight() < max_pending()) {
    // A few entries per job, so that lookups queued behind a large copy do not wait long.
    auto batch = std::make_shared<std::vector<Copy>>();
    while (!copies_.empty() && batch->size() < 8) {
      batch->push_back(copies_.front());
      copies_.pop_front();
    }
    auto copied = std::make_shared<int64_t>(0);
    worker_->submit(
        [this, batch, copied] {
          std::vector<uint8_t> bytes;
          for (const Copy& c : *batch)
            if (tiers_[c.from]->read_item(c.key, &bytes) && tiers_[c.to]->put(bytes) == TierStatus::kOk) ++*copied;
        },
        [this, copied](std::exception_ptr e) {
          if (e) {
            ++stats_.errors;
            log_error("copy", e);
          }
          stats_.rewritten += *copied;
        });
  }
}

void KvTiers::tick() {
  poll();
  const auto now = std::chrono::steady_clock::now();
  if (checking_ || now < next_check_) return;
  next_check_ = now + std::chrono::milliseconds(opt_.check_interval_ms);
  checking_ = true;
  worker_->submit_value<std::vector<uint64_t>>(
      [this] {
        std::vector<uint64_t> g;
        for (const auto& t : tiers_) g.push_back(t->generation());
        return g;
      },
      [this](std::optional<std::vector<uint64_t>>& g, std::exception_ptr e) {
        checking_ = false;
        if (e) {
          ++stats_.errors;
          log_error("check", e);
        }
        if (!g) return;
        for (size_t i = 0; i < g->size(); ++i) {
          const uint64_t now_g = (*g)[i];
          if (now_g == 0) continue;  // unreachable now, or no generations
          if (generations_[i] != 0 && generations_[i] != now_g) rewrite(i);
          generations_[i] = now_g;
        }
      });
}

std::vector<std::pair<KvNamespace, std::vector<int32_t>>> KvTiers::resident_prefixes() const {
  return prefix_.resident_prefixes();
}

void KvTiers::rewrite(size_t tier) {
  ++stats_.tier_resets;
  std::fprintf(stderr, "promptcache: tier %s lost its entries (restarted empty?): writing resident entries again\n",
               tiers_[tier]->name());
  // Everything written before went to the store that was lost: write it all again.
  written_.clear();
  for (const auto& [ns, tokens] : resident_prefixes()) stats_.rewritten += rewrite_prefix(ns, tokens);
  for (const auto& fn : on_reset_) stats_.rewritten += fn();
  // What a local tier (the disk) holds that memory may not: copied entry by entry.
  for (size_t j = 0; j < tiers_.size(); ++j) {
    if (j == tier || !tiers_[j]->listable()) continue;
    for (const TierItem& item : tiers_[j]->list()) copies_.push_back(Copy{j, tier, item.key});
  }
  pump();
}

// Worker thread: a chain's links [first, end) go to each tier that lacks them, root
// first (a crash leaves a chain that ends early, never a hole), then the whole chain is
// marked used tail first (the eviction rule: docs/tiers.md).
void KvTiers::write_chain(Write& w) {
  const KvPageStore& kv = *pool_.store();
  const int32_t P = pool_.page_size();
  std::vector<uint64_t> keys;
  for (const ChainLink& l : w.links) keys.push_back(l.key);
  const std::span<const uint64_t> todo = std::span<const uint64_t>(keys).subspan(w.first);
  std::vector<std::vector<char>> has;  // [tier][link - first]
  for (const auto& t : tiers_) {
    // A lifetime is written to every link (a put of a stored entry extends its life).
    if (w.keep_seconds > 0) has.emplace_back(todo.size(), 0);
    else has.push_back(t->has(todo));
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    bool needed = false;
    for (const auto& h : has) needed = needed || !h[i];
    if (!needed) {
      ++w.present;
      continue;
    }
    const ChainLink& l = w.links[w.first + i];
    const std::vector<uint8_t> bytes =
        serialize_link(kv, std::span(w.pages).subspan(i, 1), std::span(w.tokens).subspan(size_t(l.start), size_t(P)),
                       w.ns, LinkPos{l.start, l.parent});
    bool stored = false;
    for (size_t t = 0; t < tiers_.size(); ++t)
      if (!has[t][i] && tiers_[t]->put(bytes, w.keep_seconds) == TierStatus::kOk) stored = true;
    if (stored) {
      ++w.stored;
      w.bytes += bytes.size();
    } else {
      ++w.failed;
    }
  }
  for (const auto& t : tiers_) t->touch_chain(keys);
}

void KvTiers::start_write(std::shared_ptr<Write> w) {
  const KvPageStore* kv = pool_.store();
  worker_->submit(
      [this, w, kv] {
        if (w->chain()) {
          write_chain(*w);
          return;
        }
        if (!w->state.empty()) {  // a state entry
          const std::vector<uint8_t> bytes = serialize_state_link(*kv, w->pages[0], w->tokens, w->ns, w->link, w->state);
          bool stored = false;
          for (const auto& t : tiers_)
            if (t->put(bytes, w->keep_seconds) == TierStatus::kOk) stored = true;
          (stored ? w->stored : w->failed) = 1;
          if (stored) w->bytes = bytes.size();
          return;
        }
        const std::vector<uint8_t> bytes = serialize_entry(*kv, w->pages, w->tokens, w->ns);
        bool stored = false;
        for (const auto& t : tiers_)
          if (t->put(bytes, w->keep_seconds) == TierStatus::kOk) stored = true;
        if (stored) {
          w->stored = 1;
          w->bytes = bytes.size();
        } else {
          w->failed = 1;
        }
      },
      [this, w](std::exception_ptr e) {
        w->hold.release();
        if (e) {
          ++stats_.errors;
          log_error("write", e);
          if (w->stored + w->failed + w->present == 0) w->failed = 1;
        }
        stats_.writes += w->stored;
        stats_.written_bytes += int64_t(w->bytes);
        if (!w->state.empty()) {
          stats_.states_written += w->stored;
          stats_.state_bytes_written += int64_t(w->bytes);
        }
        stats_.links_present += w->present;
        stats_.write_failures += w->failed;
        if (w->failed > 0 || e) forget(*w);  // retried by the next save
      });
}

size_t KvTiers::queue_chain(const KvNamespace& ns, std::span<const int32_t> tokens, int64_t keep_seconds) {
  const int32_t P = pool_.page_size();
  const std::span<const int32_t> aligned = tokens.first(tokens.size() / size_t(P) * size_t(P));
  if (aligned.empty()) return 0;
  std::vector<ChainLink> links = chain_links(ns, pool_.shape(), aligned);
  // Links written (or in flight) recently are not written again: a conversation's next
  // turn writes only the pages it added. A lifetime is written to every link.
  size_t first = 0;
  if (keep_seconds <= 0)
    while (first < links.size() && recently_written(links[first].key)) ++first;
  if (first == links.size()) return 0;
  // Snapshot all of `tokens`, then use the whole pages the links cover.
  PrefixSnapshot snap = prefix_.snapshot(ns, tokens, false);
  if (snap.tokens.size() < aligned.size()) return 0;  // not all cached (evicted)
  auto w = std::make_shared<Write>(pool_);
  w->ns = ns;
  w->tokens.assign(aligned.begin(), aligned.end());
  w->links = std::move(links);
  w->first = first;
  w->keep_seconds = keep_seconds;
  w->pages.assign(snap.pages.begin() + ptrdiff_t(first), snap.pages.begin() + ptrdiff_t(w->links.size()));
  // Hold only the pages written: a reference on a partial last page would make the
  // next turn appending to it copy it.
  w->hold.attach(snap.table.entries().subspan(first, w->links.size() - first));
  snap.table.release();
  const int64_t now = now_seconds();
  for (size_t i = first; i < w->links.size(); ++i) written_[w->links[i].key] = now;
  const size_t n = w->links.size() - first;
  submit_write(std::move(w));
  return n;
}

int32_t KvTiers::save_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int64_t keep_seconds) {
  const int32_t P = pool_.page_size();
  if (int32_t(tokens.size()) < P) return 0;
  if (written_.size() > 1000000) written_.clear();
  return queue_chain(ns, tokens, keep_seconds) > 0 ? int32_t(tokens.size() / size_t(P) * size_t(P)) : 0;
}

std::vector<int32_t> KvTiers::write(const KvNamespace& ns, std::span<const int32_t> tokens, const TierWrites& w) {
  std::vector<int32_t> covered;
  covered.reserve(w.chains.size());
  for (const TierWrites::Chain& c : w.chains)
    covered.push_back(c.length > 0 && size_t(c.length) <= tokens.size()
                          ? save_prefix(ns, tokens.first(size_t(c.length)), c.keep_seconds)
                          : 0);
  for (const TierWrites::State& s : w.states)
    if (s.at > 0 && size_t(s.at) <= tokens.size()) save_state(ns, tokens.first(size_t(s.at)), s.state, s.keep_seconds);
  for (const TierWrites::Block& b : w.blocks) {
    if (b.begin < 0 || b.end <= b.begin || size_t(b.end) > tokens.size()) continue;
    const std::span<const int32_t> toks = tokens.subspan(size_t(b.begin), size_t(b.end - b.begin));
    if (block_written(ns, toks)) continue;
    PageTable at_zero(pool_);
    if (!w.block_at_zero || !w.block_at_zero(b, at_zero)) break;  // no free pages: skip the rest
    save_block(ns, toks, at_zero);
  }
  return covered;
}

int64_t KvTiers::rewrite_prefix(const KvNamespace& ns, std::span<const int32_t> tokens) {
  // The leaf's chain holds every shorter prefix of its path (each ends at one of its links).
  int64_t n = int64_t(queue_chain(ns, tokens, 0));
  // And the snapshots on it, each beside the chain.
  if (prefix_.with_states())
    for (const auto& [at, floats] : prefix_.states_on(ns, tokens)) {
      save_state(ns, tokens.first(size_t(at)), floats);
      ++n;
    }
  return n;
}

void KvTiers::save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const std::vector<std::vector<PageEntry>>& segments) {
  int64_t total = 0;
  for (const auto& seg : segments)
    for (const PageEntry& e : seg) total += e.filled;
  if (total != int64_t(tokens.size()))
    throw std::invalid_argument("save_module: segment fills sum to " + std::to_string(total) + ", not " +
                                std::to_string(tokens.size()) + " tokens");
  int32_t begin = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    int32_t n = 0;
    for (const PageEntry& e : segments[i]) n += e.filled;
    const KvNamespace sns = module_entry_ns(ns, digest, i);
    const std::span<const int32_t> toks = tokens.subspan(size_t(begin), size_t(n));
    begin += n;
    const uint64_t key = entry_key(sns, pool_.shape(), toks);
    if (!should_write(key)) continue;
    auto w = std::make_shared<Write>(pool_);
    w->ns = sns;
    w->key = key;
    w->tokens.assign(toks.begin(), toks.end());
    w->hold.attach(segments[i]);
    for (const PageEntry& e : segments[i]) w->pages.push_back(e.page);
    submit_write(std::move(w));
  }
}

void KvTiers::save_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const ModuleEntry& entry) {
  std::vector<std::vector<PageEntry>> segments;
  for (const ModuleSegment& seg : entry.segments) segments.push_back(seg.entries);
  save_module(ns, digest, tokens, segments);
}

// What the lookup of a module found: every segment's entry, or nothing.
struct KvTiers::FoundModule {
  std::vector<Entry> entries;  // [segment]; empty on a miss
  std::vector<int> tiers;      // [segment]: the tier that had it
  bool found = false;
};

KvTiers::FoundModule KvTiers::find_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                                          const Segments& segments) {
  const KvShape shape = pool_.shape();
  FoundModule f;
  for (size_t i = 0; i < segments.size(); ++i) {
    const KvNamespace sns = module_entry_ns(ns, digest, i);
    const auto toks = tokens.subspan(size_t(segments[i].first), size_t(segments[i].second - segments[i].first));
    int tier = -1;
    TierLookup r = find([&](KvTier& t) { return t.get(sns, shape, toks); }, &tier);
    if (!r.hit()) return {};  // all segments or nothing
    f.entries.push_back(std::move(r.entry));
    f.tiers.push_back(tier);
  }
  f.found = true;
  return f;
}

std::unique_ptr<RestoredModule> KvTiers::restore_module(FoundModule& f, int64_t n_tokens) {
  if (!f.found) return nullptr;
  auto out = std::make_unique<RestoredModule>(pool_);
  for (const Entry& entry : f.entries) {
    PageTable t(pool_);
    if (!restore_pages(pool_, entry, t)) return nullptr;  // out of KV memory; out releases
    out->segments.emplace_back(t.entries().begin(), t.entries().end());
    out->hold.attach(t.entries());
  }
  for (int tier : f.tiers) ++stats_.hits[size_t(tier)];
  ++stats_.module_loads;
  stats_.promoted_tokens += n_tokens;
  return out;
}

void KvTiers::load_module_async(const KvNamespace& ns, uint64_t digest, std::vector<int32_t> tokens,
                                Segments segments, std::function<void(RestoredModule*)> done) {
  check_segments(segments, tokens.size());
  const int64_t n_tokens = int64_t(tokens.size());
  auto job = std::make_shared<std::pair<std::vector<int32_t>, Segments>>(std::move(tokens), std::move(segments));
  worker_->submit_value<FoundModule>(
      [this, ns, digest, job] { return find_module(ns, digest, job->first, job->second); },
      [this, n_tokens, done = std::move(done)](std::optional<FoundModule>& f, std::exception_ptr e) {
        std::unique_ptr<RestoredModule> r;
        if (e) {
          ++stats_.errors;
          log_error("module lookup", e);
        } else if (f) {
          r = restore_module(*f, n_tokens);
        }
        if (done) done(r.get());
      });
}


bool KvTiers::load_module(const KvNamespace& ns, uint64_t digest, std::span<const int32_t> tokens,
                          const Segments& segments, ModuleEntry* out, std::vector<PageTable>* hold) {
  check_segments(segments, tokens.size());
  FoundModule f = find_module(ns, digest, tokens, segments);
  std::unique_ptr<RestoredModule> r = restore_module(f, int64_t(tokens.size()));
  if (!r) return false;
  ModuleEntry e;
  for (size_t i = 0; i < segments.size(); ++i)
    e.segments.push_back(ModuleSegment{segments[i].first, segments[i].second, std::move(r->segments[i])});
  hold->push_back(std::move(r->hold));
  *out = std::move(e);
  return true;
}

KvNamespace block_entry_ns(const KvNamespace& ns) {
  return ns.as(KvKind::kBlock);
}

bool KvTiers::block_written(const KvNamespace& ns, std::span<const int32_t> tokens) const {
  return recently_written(entry_key(block_entry_ns(ns), pool_.shape(), tokens));
}

void KvTiers::save_block(const KvNamespace& ns, std::span<const int32_t> tokens, const PageTable& at_zero) {
  if (tokens.empty() || at_zero.n_tokens() != int32_t(tokens.size())) return;
  const KvNamespace bns = block_entry_ns(ns);
  const uint64_t key = entry_key(bns, pool_.shape(), tokens);
  if (!should_write(key)) return;
  auto w = std::make_shared<Write>(pool_);
  w->ns = bns;
  w->key = key;
  w->tokens.assign(tokens.begin(), tokens.end());
  w->hold.attach(at_zero.entries());
  for (const PageEntry& e : at_zero.entries()) w->pages.push_back(e.page);
  submit_write(std::move(w));
}

void KvTiers::find_blocks(const KvNamespace& ns, std::vector<std::vector<int32_t>> blocks,
                          std::function<void(std::vector<PageTable>&)> done) {
  const KvShape shape = pool_.shape();
  const KvNamespace bns = block_entry_ns(ns);
  auto query = std::make_shared<std::vector<std::vector<int32_t>>>(std::move(blocks));
  struct Found {
    std::vector<Entry> entries;  // [block]; n_tokens 0 on a miss
    std::vector<int> tiers;
  };
  worker_->submit_value<Found>(
      [this, bns, shape, query] {
        Found f;
        for (const std::vector<int32_t>& b : *query) {
          int tier = -1;
          TierLookup r = find([&](KvTier& t) { return t.get(bns, shape, b); }, &tier);
          f.tiers.push_back(r.hit() ? tier : -1);
          f.entries.push_back(r.hit() ? std::move(r.entry) : Entry{});
        }
        return f;
      },
      [this, query, done = std::move(done)](std::optional<Found>& f, std::exception_ptr e) {
        std::vector<PageTable> out;
        for (size_t i = 0; i < query->size(); ++i) out.emplace_back(pool_);
        if (e) {
          ++stats_.errors;
          log_error("block lookup", e);
        } else if (f) {
          for (size_t i = 0; i < out.size(); ++i) {
            if (f->tiers[i] < 0) continue;
            if (!restore_pages(pool_, f->entries[i], out[i])) continue;  // out of KV memory
            ++stats_.hits[size_t(f->tiers[i])];
            ++stats_.block_loads;
            stats_.promoted_tokens += out[i].n_tokens();
          }
        }
        if (done) done(out);
      });
}

}  // namespace pc
