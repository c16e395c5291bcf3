#include "kv/module_store.h"

#include <algorithm>

namespace pc {

int64_t ModuleEntry::n_tokens() const {
  int64_t n = 0;
  for (const ModuleSegment& s : segments) n += s.tok_end - s.tok_begin;
  return n;
}

ModuleStore::~ModuleStore() {
  while (!entries_.empty()) drop(entries_.begin());
}

void ModuleStore::touch(ModuleEntry& e) {
  e.last_use = ++clock_;
  if (!evictable(e)) return;
  lru_.push({e.last_use, e.id, gen_[e.id]}, entries_.size(), [&] {
    std::vector<LruHeap::Item> live;
    for (auto& [k, x] : entries_)
      if (evictable(x) && x.id != e.id) live.push_back({x.last_use, x.id, gen_[x.id]});
    return live;
  });
}

const ModuleEntry* ModuleStore::peek(const ModuleKey& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.expires <= ModuleEntry::Clock::now()) return nullptr;
  return &it->second;
}

const ModuleEntry* ModuleStore::find(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.expires <= ModuleEntry::Clock::now()) {
    drop(it);
    ++evicted_;
    it = entries_.end();
  }
  if (it == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  ++it->second.hits;
  touch(it->second);
  return &it->second;
}

void ModuleStore::insert(const ModuleKey& key, ModuleEntry entry, bool keep_policy) {
  for (const ModuleSegment& s : entry.segments)
    for (const PageEntry& e : s.entries) pool_->ref_cache(e.page);
  if (auto old = entries_.find(key); old != entries_.end()) {
    if (keep_policy) {
      entry.pins = old->second.pins;
      entry.expires = old->second.expires;
      entry.hits = old->second.hits;
    }
    drop(old);
  }
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = int32_t(by_id_.size());
    by_id_.push_back(entries_.end());
    gen_.push_back(0);
  }
  entry.id = id;
  if (entry.pins > 0) ++n_pinned_;
  auto [it, added] = entries_.emplace(key, std::move(entry));
  by_id_[id] = it;
  touch(it->second);
}

bool ModuleStore::pin(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  if (it->second.pins++ == 0) ++n_pinned_;
  return true;
}

bool ModuleStore::unpin(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.pins == 0) return false;
  if (--it->second.pins == 0) {
    --n_pinned_;
    touch(it->second);  // a candidate again
  }
  return true;
}

bool ModuleStore::erase(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  drop(it);
  return true;
}

int ModuleStore::erase_digest(const KvNamespace& ns, uint64_t digest) {
  int n = 0;
  // Keys order by (ns, digest, shift): every shift of one module is one range.
  auto it = entries_.lower_bound(ModuleKey{ns, digest, INT32_MIN});
  while (it != entries_.end() && it->first.ns == ns && it->first.digest == digest) {
    auto next = std::next(it);
    drop(it);
    ++n;
    it = next;
  }
  return n;
}

size_t ModuleStore::drop(Iter it) {
  size_t freed = 0;
  for (const ModuleSegment& s : it->second.segments)
    for (const PageEntry& e : s.entries)
      if (pool_->unref_cache(e.page)) freed += pool_->page_bytes();
  const int32_t id = it->second.id;
  if (it->second.pins > 0) --n_pinned_;
  by_id_[id] = entries_.end();
  ++gen_[id];
  free_ids_.push_back(id);
  entries_.erase(it);
  return freed;
}

size_t ModuleStore::evict_expired(ModuleEntry::Clock::time_point now) {
  size_t freed = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.expires <= now) {
      freed += drop(it);
      ++evicted_;
    }
    it = next;
  }
  return freed;
}

size_t ModuleStore::evict(size_t bytes) {
  size_t freed = evict_expired(ModuleEntry::Clock::now());
  while (freed < bytes) {
    const int32_t victim = lru_.pop([&](const LruHeap::Item& x) {
      if (x.gen != gen_[x.id] || by_id_[x.id] == entries_.end()) return false;
      const ModuleEntry& e = by_id_[x.id]->second;
      return e.last_use == x.last_use && evictable(e);
    });
    if (victim < 0) break;
    freed += drop(by_id_[victim]);
    ++evicted_;
  }
  return freed;
}

ModuleStats ModuleStore::stats() const {
  ModuleStats s;
  s.entries = int64_t(entries_.size());
  for (const auto& [k, e] : entries_) {
    s.tokens += e.n_tokens();
    for (const ModuleSegment& seg : e.segments) s.bytes += int64_t(seg.entries.size() * pool_->page_bytes());
  }
  s.hits = hits_;
  s.misses = misses_;
  s.evicted = evicted_;
  return s;
}

}  // namespace pc
