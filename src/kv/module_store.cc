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
  it->second.last_use = ++clock_;
  return &it->second;
}

void ModuleStore::insert(const ModuleKey& key, ModuleEntry entry) {
  erase(key);
  for (const ModuleSegment& s : entry.segments)
    for (const PageEntry& e : s.entries) pool_->ref_cache(e.page);
  entry.last_use = ++clock_;
  entries_.emplace(key, std::move(entry));
}

bool ModuleStore::pin(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  ++it->second.pins;
  return true;
}

bool ModuleStore::unpin(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.pins == 0) return false;
  --it->second.pins;
  return true;
}

bool ModuleStore::erase(const ModuleKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  drop(it);
  return true;
}

size_t ModuleStore::drop(std::map<ModuleKey, ModuleEntry>::iterator it) {
  size_t freed = 0;
  for (const ModuleSegment& s : it->second.segments)
    for (const PageEntry& e : s.entries)
      if (pool_->unref_cache(e.page)) freed += pool_->page_bytes();
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
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.pins == 0 && (victim == entries_.end() || it->second.last_use < victim->second.last_use))
        victim = it;
    if (victim == entries_.end()) break;
    freed += drop(victim);
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
