#include "kv/radix_index.h"

#include <algorithm>

#include "kv/kv_check.h"
#include "kv/state_store.h"

namespace pc {

RadixIndex::RadixIndex(PagePool& pool) : pool_(&pool), page_refs_(pool.n_pages(), 0) {}

RadixIndex::~RadixIndex() {
  for (const Node& n : nodes_) {
    if (!n.alive) continue;
    for (const PageSlice& s : n.slices) pool_->unref_cache(s.page);
    if (n.state >= 0 && states_) states_->release(n.state);
  }
  if (pool_->reclaimer() == this) pool_->set_reclaimer(nullptr);
}

// ---- node arena -------------------------------------------------------------

int32_t RadixIndex::new_node() {
  int32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = int32_t(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[id];
  n.alive = true;
  n.parent = -1;
  n.depth = n.lock_ref = n.pins = 0;
  n.last_use = clock_;
  n.hits = 0;
  n.created = n.used = Clock::now();
  n.expires = Clock::time_point::max();
  n.retain_until = Clock::time_point::min();
  n.retain_for = {};
  n.retain_pages = 0;
  n.state = -1;
  return id;
}

void RadixIndex::free_node(int32_t id) {
  Node& n = nodes_[id];
  set_node_expiry(id, Clock::time_point::max());
  end_retention(id);
  if (n.pins > 0) --n_pinned_;
  n.pins = 0;
  n.alive = false;
  ++n.gen;
  n.parent = -1;
  n.tokens.clear();  // keep capacity: the next node reuses it
  n.slices.clear();
  n.children.clear();
  free_nodes_.push_back(id);
}

void RadixIndex::ref_page(int32_t page) {
  pool_->ref_cache(page);
  if (page_refs_[page]++ == 0) ++n_pages_held_;
}

size_t RadixIndex::unref_page(int32_t page) {
  if (--page_refs_[page] == 0) --n_pages_held_;
  return pool_->unref_cache(page) ? pool_->page_bytes() : 0;
}

int32_t RadixIndex::find_root(const KvNamespace& ns) const {
  auto it = roots_.find(ns);
  return it == roots_.end() ? -1 : it->second;
}

// A namespace whose last entry went, and that no sequence holds, keeps no root: a
// namespace (a tenant's cache_salt) costs nothing once its entries are gone.
void RadixIndex::drop_root_if_empty(int32_t id) {
  Node& n = nodes_[id];
  if (!n.alive || n.parent >= 0 || !n.children.empty() || n.lock_ref > 0 || n.pins > 0) return;
  for (auto it = roots_.begin(); it != roots_.end(); ++it)
    if (it->second == id) {
      roots_.erase(it);
      free_node(id);
      return;
    }
}

int32_t RadixIndex::get_root(const KvNamespace& ns) {
  const int32_t found = find_root(ns);
  if (found >= 0) return found;
  const int32_t id = new_node();
  roots_.emplace(ns, id);
  return id;
}

// ---- children: a small vector sorted by first token ---------------------------

int32_t RadixIndex::find_child(int32_t node, int32_t token) const {
  const std::vector<Child>& ch = nodes_[node].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), token,
                             [](const Child& c, int32_t t) { return c.token < t; });
  return it != ch.end() && it->token == token ? it->node : -1;
}

void RadixIndex::add_child(int32_t parent, int32_t child) {
  std::vector<Child>& ch = nodes_[parent].children;
  const int32_t token = nodes_[child].tokens.front();
  auto it = std::lower_bound(ch.begin(), ch.end(), token,
                             [](const Child& c, int32_t t) { return c.token < t; });
  PC_KV_DCHECK(it == ch.end() || it->token != token, "duplicate child token");
  ch.insert(it, Child{token, child});
  nodes_[child].parent = parent;
}

void RadixIndex::remove_child(int32_t parent, int32_t child) {
  std::vector<Child>& ch = nodes_[parent].children;
  auto it = std::find_if(ch.begin(), ch.end(), [&](const Child& c) { return c.node == child; });
  PC_KV_CHECK(it != ch.end(), "child missing from its parent");
  ch.erase(it);
}

// ---- walking and splitting -------------------------------------------------------

// Follows `tokens` from `root`. Returns the deepest node whose run is fully matched
// and sets *len to the tokens matched up to its end. When the match ends inside a
// run and `do_split`, that run is split there first, so the result covers the whole
// match.
int32_t RadixIndex::descend(int32_t root, std::span<const int32_t> tokens, bool do_split,
                            int32_t* len) {
  int32_t node = root;
  size_t i = 0;
  while (i < tokens.size()) {
    const int32_t c = find_child(node, tokens[i]);
    if (c < 0) break;
    const std::vector<int32_t>& run = nodes_[c].tokens;
    size_t k = 1;
    while (k < run.size() && i + k < tokens.size() && run[k] == tokens[i + k]) ++k;
    if (k < run.size()) {
      if (do_split) {
        node = split(c, int32_t(k));
        i += k;
      }
      break;
    }
    node = c;
    i += k;
  }
  *len = int32_t(i);
  return node;
}

// Splits node `id` after its first k tokens (0 < k < run length):
//
//   parent ─ id [t0 .. tk-1 tk .. tn]   →   parent ─ mid [t0 .. tk-1] ─ id [tk .. tn]
//
// `id` keeps the tail, so lock handles and pins on it stay valid; `mid` inherits the
// lock count (every lock through id passes through mid). A slice cut in two holds
// one more cache reference on its page. Returns mid.
int32_t RadixIndex::split(int32_t id, int32_t k) {
  const int32_t mid = new_node();  // may reallocate nodes_: take references after
  Node& n = nodes_[id];
  Node& m = nodes_[mid];
  PC_KV_CHECK(k > 0 && k < int32_t(n.tokens.size()), "split point outside the run");
  m.depth = n.depth;
  m.lock_ref = n.lock_ref;
  m.last_use = n.last_use;
  m.hits = n.hits;  // every match into n's run went through mid's part of it
  m.created = n.created;
  m.used = n.used;
  set_node_expiry(mid, n.expires);
  m.tokens.assign(n.tokens.begin(), n.tokens.begin() + k);
  n.tokens.erase(n.tokens.begin(), n.tokens.begin() + k);
  n.depth += k;
  // Whole slices of the first k tokens move to mid; a straddling one is cut.
  size_t j = 0;
  int32_t acc = 0;
  while (acc + n.slices[j].size() <= k) acc += n.slices[j++].size();
  m.slices.assign(n.slices.begin(), n.slices.begin() + j);
  n.slices.erase(n.slices.begin(), n.slices.begin() + j);
  if (acc < k) {
    PageSlice& s = n.slices.front();
    const int32_t cut = s.begin + (k - acc);
    m.slices.push_back({s.page, s.begin, cut});
    s.begin = cut;
    ref_page(s.page);
  }
  // Relink: mid takes id's place under the parent (same first token).
  const int32_t parent = n.parent;
  for (Child& c : nodes_[parent].children) {
    if (c.node == id) c.node = mid;
  }
  m.parent = parent;
  m.children.push_back(Child{n.tokens.front(), id});
  n.parent = mid;
  ++stats_.entries;
  return mid;
}

// A new leaf under `parent` for tokens[start, end), referencing the table's slots.
int32_t RadixIndex::add_leaf(int32_t parent, std::span<const int32_t> tokens, int32_t start,
                             const PageTable& table) {
  const int32_t id = new_node();
  Node& leaf = nodes_[id];
  leaf.depth = start;
  leaf.tokens.assign(tokens.begin() + start, tokens.end());
  const int32_t P = pool_->page_size();
  const std::span<const PageEntry> entries = table.entries();
  for (size_t e = size_t(start / P); e < entries.size(); ++e) {
    const int32_t begin = e == size_t(start / P) ? start % P : 0;
    leaf.slices.push_back({entries[e].page, begin, entries[e].filled});
    ref_page(entries[e].page);
  }
  add_child(parent, id);
  ++stats_.entries;
  stats_.tokens += int64_t(leaf.tokens.size());
  return id;
}

// ---- LRU of evictable leaves --------------------------------------------------

bool RadixIndex::evictable(int32_t id) const {
  const Node& n = nodes_[id];
  return n.alive && n.parent >= 0 && n.children.empty() && n.lock_ref == 0 && n.pins == 0 &&
         n.retain_until == Clock::time_point::min();
}

// Marks node → root used now; a leaf at the end becomes the most recent candidate.
void RadixIndex::touch(int32_t node) {
  ++clock_;
  const Clock::time_point now = Clock::now();
  for (int32_t n = node; n >= 0; n = nodes_[n].parent) {
    Node& x = nodes_[n];
    x.last_use = clock_;
    x.used = now;
    // Retention slides: a request through a retained node re-arms it.
    if (retained(n) && x.retain_until > now) x.retain_until = std::max(x.retain_until, now + x.retain_for);
  }
  push_lru(node);
}

// Heap entries are never removed in place: an entry is valid only while its node is
// alive with the same generation, evictable and not used since. Every event that
// makes a node evictable or changes its time pushes a fresh entry.
void RadixIndex::push_lru(int32_t id) {
  if (!evictable(id)) return;
  lru_.push({nodes_[id].last_use, id, nodes_[id].gen}, nodes_.size(), [&] {
    std::vector<LruHeap::Item> live;
    for (int32_t i = 0; i < int32_t(nodes_.size()); ++i)
      if (evictable(i) && i != id) live.push_back({nodes_[i].last_use, i, nodes_[i].gen});
    return live;
  });
}

int32_t RadixIndex::pop_lru() {
  return lru_.pop([&](const LruHeap::Item& e) {
    const Node& n = nodes_[e.id];
    return n.gen == e.gen && n.last_use == e.last_use && evictable(e.id);
  });
}

size_t RadixIndex::remove_leaf(int32_t id) {
  size_t freed = 0;
  for (const PageSlice& s : nodes_[id].slices) freed += unref_page(s.page);
  if (nodes_[id].state >= 0 && states_) freed += states_->release(nodes_[id].state);
  nodes_[id].state = -1;
  --stats_.entries;
  stats_.tokens -= int64_t(nodes_[id].tokens.size());
  ++stats_.evicted;
  const int32_t parent = nodes_[id].parent;
  remove_child(parent, id);
  free_node(id);
  if (nodes_[parent].parent < 0) drop_root_if_empty(parent);
  else push_lru(parent);
  return freed;
}

size_t RadixIndex::evict(size_t bytes, Retention r) {
  size_t freed = evict_expired(Clock::now());  // expired entries go first, whatever their age
  auto lru = [&] {
    while (freed < bytes) {
      const int32_t leaf = pop_lru();
      if (leaf < 0) break;
      freed += remove_leaf(leaf);
    }
  };
  lru();
  if (freed >= bytes || r != Retention::kOverrideRetention || !has_retained()) return freed;
  // Admin eviction wins: end retentions, soonest to lapse first, evicting as they free.
  std::vector<int32_t> held;
  for (int32_t id = 0; id < int32_t(nodes_.size()); ++id)
    if (nodes_[id].alive && retained(id) && nodes_[id].lock_ref == 0 && nodes_[id].pins == 0) held.push_back(id);
  std::sort(held.begin(), held.end(),
            [&](int32_t a, int32_t b) { return nodes_[a].retain_until < nodes_[b].retain_until; });
  for (int32_t id : held) {
    if (freed >= bytes) break;
    if (!nodes_[id].alive || !retained(id)) continue;
    end_retention(id);
    ++stats_.retention_overridden;
    push_lru(id);
    lru();
  }
  return freed;
}

// ---- public operations ----------------------------------------------------------

PrefixMatch RadixIndex::match_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length,
                                     MatchUse use) {
  PrefixMatch m;
  const bool counted = use == MatchUse::kRequest;
  const int32_t root = find_root(ns);
  const size_t limit = std::min(tokens.size(), size_t(std::max(0, max_length)));
  // A peek walks without splitting: the match may end inside the run of `partial`,
  // `partial_len` tokens into it.
  int32_t partial = -1, partial_len = 0;
  if (root >= 0) {
    m.node = descend(root, tokens.first(limit), /*do_split=*/counted, &m.length);
    if (!counted && size_t(m.length) < limit) {
      const int32_t c = find_child(m.node, tokens[size_t(m.length)]);
      if (c >= 0) {
        const std::vector<int32_t>& run = nodes_[c].tokens;
        while (size_t(partial_len) < run.size() && size_t(m.length + partial_len) < limit &&
               run[size_t(partial_len)] == tokens[size_t(m.length + partial_len)])
          ++partial_len;
        partial = c;  // partial_len >= 1: the child was found by its first token
      }
    }
  }
  if (m.length + partial_len == 0) {
    if (counted) ++stats_.misses;
    return m;
  }
  if (counted) {
    ++stats_.hits;
    stats_.hit_tokens += m.length;
  }
  // Collect the path leaf → root, then its slices root → leaf.
  path_.clear();
  for (int32_t n = m.node; n != root; n = nodes_[n].parent) {
    path_.push_back(n);
    if (counted) ++nodes_[n].hits;
  }
  for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
    const std::vector<PageSlice>& s = nodes_[*it].slices;
    m.slices.insert(m.slices.end(), s.begin(), s.end());
  }
  if (partial >= 0) {  // the first partial_len tokens of the partial node's slices
    int32_t left = partial_len;
    for (const PageSlice& s : nodes_[partial].slices) {
      if (left == 0) break;
      const int32_t take = std::min(left, s.size());
      m.slices.push_back(PageSlice{s.page, s.begin, s.begin + take});
      left -= take;
    }
    m.length += partial_len;
    m.node = partial;
  }
  if (counted) touch(m.node);
  return m;
}

void RadixIndex::set_node_state(int32_t node, int32_t handle) {
  PC_KV_CHECK(node >= 0 && nodes_[node].alive && nodes_[node].parent >= 0, "a state snapshot needs a live entry");
  PC_KV_CHECK(nodes_[node].state < 0, "the node holds a state snapshot already");
  nodes_[node].state = handle;
}

int32_t RadixIndex::state_prefix(const KvNamespace& ns, std::span<const int32_t> tokens, int32_t max_length,
                                 int32_t* handle) const {
  *handle = -1;
  int32_t best = 0;
  const int32_t root = find_root(ns);
  if (root < 0) return 0;
  const size_t limit = std::min(tokens.size(), size_t(std::max(0, max_length)));
  int32_t node = root;
  size_t i = 0;
  while (i < limit) {
    const int32_t c = find_child(node, tokens[i]);
    if (c < 0) break;
    const std::vector<int32_t>& run = nodes_[c].tokens;
    if (i + run.size() > limit || !std::equal(run.begin(), run.end(), tokens.begin() + i)) break;
    i += run.size();
    node = c;
    if (nodes_[c].state >= 0) {
      best = int32_t(i);
      *handle = nodes_[c].state;
    }
  }
  return best;
}

void RadixIndex::lock(int32_t node) {
  if (node < 0) return;
  PC_KV_CHECK(node < int32_t(nodes_.size()) && nodes_[node].alive, "lock of a dead node");
  for (int32_t n = node; n >= 0; n = nodes_[n].parent) ++nodes_[n].lock_ref;
}

void RadixIndex::unlock(int32_t node) {
  if (node < 0) return;
  PC_KV_CHECK(node < int32_t(nodes_.size()) && nodes_[node].alive, "unlock of a dead node");
  int32_t root = node;
  for (int32_t n = node; n >= 0; n = nodes_[n].parent) {
    PC_KV_CHECK(nodes_[n].lock_ref > 0, "unlock without lock");
    if (--nodes_[n].lock_ref == 0) push_lru(n);
    root = n;
  }
  drop_root_if_empty(root);
}

int32_t RadixIndex::insert(const KvNamespace& ns, std::span<const int32_t> tokens,
                           const PageTable& table) {
  PC_KV_CHECK(&table.pool() == pool_, "table from another pool");
  PC_KV_CHECK(int64_t(tokens.size()) == table.n_tokens(), "tokens do not match the table");
  const std::span<const PageEntry> entries = table.entries();
  for (size_t e = 0; e + 1 < entries.size(); ++e) {
    PC_KV_CHECK(entries[e].filled == pool_->page_size(), "table is not aligned");
  }
  if (tokens.empty()) return 0;
  const int32_t root = get_root(ns);
  int32_t len = 0;
  int32_t node = descend(root, tokens, /*do_split=*/true, &len);
  const int32_t added = int32_t(tokens.size()) - len;
  if (added > 0) node = add_leaf(node, tokens, len, table);
  touch(node);
  return added;
}

RadixIndex::Anchor RadixIndex::anchor(const KvNamespace& ns, std::span<const int32_t> tokens) const {
  int32_t node = find_root(ns);
  if (node < 0 || tokens.empty()) return {};
  size_t at = 0;
  while (at < tokens.size()) {
    const int32_t c = find_child(node, tokens[at]);
    if (c < 0) return {};
    const std::vector<int32_t>& run = nodes_[c].tokens;
    const size_t n = std::min(run.size(), tokens.size() - at);
    if (!std::equal(run.begin(), run.begin() + n, tokens.begin() + at)) return {};
    at += n;
    node = c;
  }
  return {node, nodes_[node].gen};
}

bool RadixIndex::path_slices(const KvNamespace& ns, Anchor a, int32_t begin, std::span<const int32_t> tokens,
                             std::vector<PageSlice>* out) const {
  if (a.node < 0 || a.node >= int32_t(nodes_.size())) return false;
  const Node& leaf = nodes_[a.node];
  if (!leaf.alive || leaf.gen != a.gen || leaf.parent < 0) return false;
  const int32_t end = begin + int32_t(tokens.size());
  if (begin < 0 || end > leaf.depth + int32_t(leaf.tokens.size())) return false;
  // The path's nodes overlapping [begin, end), deepest first.
  std::vector<int32_t> path;
  int32_t n = a.node;
  for (; nodes_[n].parent >= 0; n = nodes_[n].parent)
    if (nodes_[n].depth < end) path.push_back(n);
  if (n != find_root(ns)) return false;  // another namespace's tree
  std::vector<PageSlice> got;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const Node& x = nodes_[*it];
    const int32_t lo = std::max(begin, x.depth), hi = std::min(end, x.depth + int32_t(x.tokens.size()));
    if (lo >= hi) continue;
    if (!std::equal(x.tokens.begin() + (lo - x.depth), x.tokens.begin() + (hi - x.depth),
                    tokens.begin() + (lo - begin)))
      return false;
    // Slices of the run's tokens [lo - depth, hi - depth).
    int32_t acc = 0;
    for (const PageSlice& s : x.slices) {
      const int32_t s0 = x.depth + acc, s1 = s0 + s.size();
      acc += s.size();
      const int32_t a0 = std::max(lo, s0), a1 = std::min(hi, s1);
      if (a0 < a1) got.push_back({s.page, s.begin + (a0 - s0), s.begin + (a1 - s0)});
    }
  }
  out->insert(out->end(), got.begin(), got.end());
  return true;
}

// The node ending exactly after `tokens` (splitting one if do_split), or -1.
int32_t RadixIndex::find_exact(const KvNamespace& ns, std::span<const int32_t> tokens,
                               bool do_split) {
  const int32_t root = find_root(ns);
  if (root < 0 || tokens.empty()) return -1;
  int32_t len = 0;
  const int32_t node = descend(root, tokens, /*do_split=*/false, &len);
  if (len == int32_t(tokens.size())) return node;
  // The rest may end inside the next run.
  const int32_t c = find_child(node, tokens[len]);
  if (c < 0 || !do_split) return -1;
  const std::vector<int32_t>& run = nodes_[c].tokens;
  const std::span<const int32_t> rest = tokens.subspan(len);
  if (rest.size() >= run.size() || !std::equal(rest.begin(), rest.end(), run.begin())) return -1;
  return split(c, int32_t(rest.size()));
}

bool RadixIndex::pin(const KvNamespace& ns, std::span<const int32_t> tokens) {
  const int32_t node = find_exact(ns, tokens, /*do_split=*/true);
  if (node < 0) return false;
  if (nodes_[node].pins++ == 0) ++n_pinned_;
  return true;
}

bool RadixIndex::is_entry(const KvNamespace& ns, int32_t id) const {
  const int32_t root = find_root(ns);
  if (root < 0 || id < 0 || id >= int32_t(nodes_.size()) || id == root) return false;
  const Node& n = nodes_[id];
  if (!n.alive || !n.children.empty()) return false;
  int32_t top = id;
  while (nodes_[top].parent >= 0) top = nodes_[top].parent;
  return top == root;
}

bool RadixIndex::pin_entry(int32_t id) {
  if (id < 0 || id >= int32_t(nodes_.size()) || !nodes_[id].alive || nodes_[id].parent < 0) return false;
  if (nodes_[id].pins++ == 0) ++n_pinned_;
  return true;
}

bool RadixIndex::unpin_entry(int32_t id) {
  if (id < 0 || id >= int32_t(nodes_.size()) || !nodes_[id].alive) return false;
  for (int32_t n = id; n >= 0 && nodes_[n].parent >= 0; n = nodes_[n].parent) {
    if (nodes_[n].pins == 0) continue;
    if (--nodes_[n].pins == 0) --n_pinned_;
    push_lru(n);
    return true;
  }
  return false;
}

size_t RadixIndex::evict_entry(int32_t id) {
  size_t freed = 0;
  while (id >= 0 && id < int32_t(nodes_.size())) {
    const Node& n = nodes_[id];
    if (!n.alive || n.parent < 0 || !n.children.empty() || n.lock_ref > 0 || n.pins > 0) break;
    if (retained(id)) {
      end_retention(id);
      ++stats_.retention_overridden;
    }
    const int32_t parent = n.parent;
    const bool top = nodes_[parent].parent < 0;
    freed += remove_leaf(id);
    if (top) break;  // the root: dropped with its last entry (remove_leaf)
    id = parent;
  }
  return freed;
}

bool RadixIndex::unpin(const KvNamespace& ns, std::span<const int32_t> tokens) {
  const int32_t node = find_exact(ns, tokens, /*do_split=*/false);
  if (node < 0 || nodes_[node].pins == 0) return false;
  if (--nodes_[node].pins == 0) --n_pinned_;
  push_lru(node);
  return true;
}

// ---- retention ----------------------------------------------------------------
void RadixIndex::end_retention(int32_t id) {
  Node& n = nodes_[id];
  if (!retained(id)) return;
  --stats_.retained;
  stats_.retained_pages -= n.retain_pages;
  n.retain_until = Clock::time_point::min();
  n.retain_for = {};
  n.retain_pages = 0;
}

bool RadixIndex::retain(const KvNamespace& ns, std::span<const int32_t> tokens, Clock::duration lifetime,
                        Clock::time_point now, Clock::time_point* until) {
  const int32_t node = find_exact(ns, tokens, /*do_split=*/true);
  if (node < 0 || lifetime <= Clock::duration::zero()) return false;
  Node& n = nodes_[node];
  const Clock::time_point end = now + lifetime;
  if (retained(node) && n.retain_until > now) {
    n.retain_until = std::max(n.retain_until, end);
    n.retain_for = std::max(n.retain_for, lifetime);
  } else {
    end_retention(node);  // a lapsed one not yet released
    const int32_t P = pool_->page_size();
    const int64_t pages = (int64_t(tokens.size()) + P - 1) / P;
    if (stats_.retained_pages + pages > retention_limit_) {
      ++stats_.retention_refused;
      return false;
    }
    n.retain_until = end;
    n.retain_for = lifetime;
    n.retain_pages = pages;
    ++stats_.retained;
    stats_.retained_pages += pages;
  }
  next_lapse_ = std::min(next_lapse_, n.retain_until);
  if (until) *until = n.retain_until;
  return true;
}

RadixIndex::Retained RadixIndex::retained_prefix(const KvNamespace& ns,
                                                 std::span<const int32_t> tokens) const {
  Retained r;
  int32_t node = find_root(ns);
  if (node < 0 || !has_retained()) return r;
  const Clock::time_point now = Clock::now();
  size_t at = 0;
  while (at < tokens.size()) {
    const int32_t c = find_child(node, tokens[at]);
    if (c < 0) break;
    const std::vector<int32_t>& run = nodes_[c].tokens;
    if (run.size() > tokens.size() - at || !std::equal(run.begin(), run.end(), tokens.begin() + at)) break;
    at += run.size();
    node = c;
    if (retained(c) && nodes_[c].retain_until > now) r = {int32_t(at), nodes_[c].retain_until};
  }
  return r;
}

void RadixIndex::release_lapsed(Clock::time_point now) {
  if (!has_retained() || now < next_lapse_) return;
  next_lapse_ = Clock::time_point::max();
  for (int32_t id = 0; id < int32_t(nodes_.size()); ++id) {
    if (!nodes_[id].alive || !retained(id)) continue;
    if (nodes_[id].retain_until <= now) {
      end_retention(id);
      push_lru(id);
    } else {
      next_lapse_ = std::min(next_lapse_, nodes_[id].retain_until);
    }
  }
}

// ---- expiry -------------------------------------------------------------------

void RadixIndex::set_node_expiry(int32_t id, Clock::time_point at) {
  Node& n = nodes_[id];
  n_expiring_ += int64_t(at != Clock::time_point::max()) - int64_t(n.expires != Clock::time_point::max());
  n.expires = at;
}

bool RadixIndex::set_expiry(const KvNamespace& ns, std::span<const int32_t> tokens,
                            Clock::time_point at) {
  const int32_t node = find_exact(ns, tokens, /*do_split=*/true);
  if (node < 0) return false;
  set_node_expiry(node, at);
  return true;
}

size_t RadixIndex::remove_subtree(int32_t id) {
  size_t freed = 0;
  while (!nodes_[id].children.empty()) freed += remove_subtree(nodes_[id].children.back().node);
  return freed + remove_leaf(id);
}

size_t RadixIndex::evict_expired(Clock::time_point now) {
  release_lapsed(now);
  if (n_expiring_ == 0) return 0;
  size_t freed = 0;
  // Removal frees ids but never moves the arena, so the scan may go on.
  for (int32_t id = 0; id < int32_t(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    // lock_ref counts the subtree's locks too: 0 means no sequence uses any of it.
    if (n.alive && n.parent >= 0 && n.expires <= now && n.lock_ref == 0) freed += remove_subtree(id);
  }
  return freed;
}

// ---- introspection -------------------------------------------------------------

RadixStats RadixIndex::stats() const {
  RadixStats s = stats_;
  s.bytes = int64_t(n_pages_held_) * int64_t(pool_->page_bytes());
  return s;
}

size_t RadixIndex::metadata_bytes() const {
  size_t b = nodes_.capacity() * sizeof(Node) + lru_.capacity_bytes() +
             page_refs_.capacity() * sizeof(int32_t) + free_nodes_.capacity() * sizeof(int32_t);
  for (const Node& n : nodes_) {
    b += n.tokens.capacity() * sizeof(int32_t) + n.slices.capacity() * sizeof(PageSlice) +
         n.children.capacity() * sizeof(Child);
  }
  return b;
}

RadixIndex::NodeView RadixIndex::node(int32_t id) const {
  PC_KV_CHECK(id >= 0 && id < int32_t(nodes_.size()) && nodes_[id].alive, "no such node");
  const Node& n = nodes_[id];
  return {n.parent, n.tokens,  n.slices, n.lock_ref, n.pins,    n.children.empty(),
          n.depth,  n.hits,    n.created, n.used,    n.expires, n.retain_until, n.retain_for, n.retain_pages,
          n.state};
}

std::vector<KvNamespace> RadixIndex::namespaces() const {
  std::vector<KvNamespace> out;
  for (const auto& [ns, root] : roots_) out.push_back(ns);
  return out;
}

void RadixIndex::for_each_leaf(const KvNamespace& ns, const std::function<void(int32_t)>& fn) const {
  const int32_t root = find_root(ns);
  if (root < 0) return;
  std::vector<int32_t> stack{root};
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    const Node& n = nodes_[id];
    if (n.children.empty() && id != root) fn(id);
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back(it->node);
  }
}

void RadixIndex::count_page_refs(std::vector<int32_t>& per_page) const {
  per_page.resize(page_refs_.size(), 0);
  for (size_t p = 0; p < page_refs_.size(); ++p) per_page[p] += page_refs_[p];
}

}  // namespace pc
