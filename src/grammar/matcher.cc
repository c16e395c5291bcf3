#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace pc::grammar {

namespace {

// Masks kept per automaton before the cache starts over (each is n_vocab bits).
constexpr size_t kMaskCacheBytes = size_t(64) << 20;

}  // namespace

Automaton::Automaton(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> trie)
    : g_(std::move(g)), trie_(std::move(trie)) {
  is_eog_.assign(trie_->n_vocab(), 0);
  for (int32_t id : trie_->eog())
    if (id >= 0 && id < trie_->n_vocab()) is_eog_[id] = 1;
  std::vector<int32_t> none;
  intern_state(none);  // kDead = 0
  std::vector<int32_t> first;
  for (int32_t a : g_->alts[g_->root]) expand(a, kRoot, first);
  expanded_.clear();
  start_ = intern_state(first);
  walk_.resize(size_t(trie_->max_depth()) + 1);
}

int32_t Automaton::node(int32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent + 1);
  auto [it, added] = node_ids_.try_emplace(key, int32_t(nodes_.size()));
  if (added) nodes_.push_back({pos, parent});
  return it->second;
}

int32_t Automaton::intern_state(std::vector<int32_t>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
  auto [it, added] = state_ids_.try_emplace(std::move(key), int32_t(states_.size()));
  if (added) {
    states_.push_back(stacks);
    rows_.resize(rows_.size() + 256, kUnknown);
  }
  return it->second;
}

// Adds to `out` the stacks that continue at `pos` with parent `parent`, expanded
// until each top is a byte set: a rule reference pushes its continuation (unless it
// is the end of the alternative: a tail call keeps the stack flat) and expands every
// alternative of the rule; an alternative's end pops to the parent. No left recursion
// (Grammar::check) means this terminates; `expanded_` skips repeated work. A worklist,
// not recursion: a long chain of rules must not exhaust the engine thread's stack.
void Automaton::expand(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
  using Op = Grammar::Op;
  std::vector<std::pair<int32_t, int32_t>> todo{{pos, parent}};
  while (!todo.empty()) {
    auto [p, par] = todo.back();
    todo.pop_back();
    for (;;) {
      const uint64_t key = (uint64_t(uint32_t(p)) << 32) | uint32_t(par + 1);
      if (!expanded_.insert(key).second) break;
      const Grammar::Elem& e = g_->elems[p];
      if (e.op == Op::kBytes) {
        out.push_back(node(p, par));
        break;
      }
      if (e.op == Op::kEnd) {
        if (par == kRoot) {
          out.push_back(kComplete);
          break;
        }
        const Node n = nodes_[par];
        p = n.pos;
        par = n.parent;
        continue;
      }
      const int32_t cont = g_->elems[p + 1].op == Op::kEnd ? par : node(p + 1, par);
      for (int32_t a : g_->alts[e.arg]) todo.push_back({a, cont});
      break;
    }
  }
}

int32_t Automaton::compute_next(int32_t state, uint8_t byte) {
  std::vector<int32_t> out;
  expanded_.clear();
  // states_ may grow below (node() does not touch it, intern_state does after), so
  // iterate over a copy of the member list.
  const std::vector<int32_t> stacks = states_[state];
  for (int32_t s : stacks) {
    if (s == kComplete) continue;
    const Node n = nodes_[s];
    if (has_byte(g_->sets[g_->elems[n.pos].arg], byte)) expand(n.pos + 1, n.parent, out);
  }
  if (out.size() > kMaxStacks) out.clear();
  const int32_t next = intern_state(out);
  rows_[size_t(state) * 256 + byte] = next;
  return next;
}

int32_t Automaton::advance(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    state = next(state, uint8_t(c));
    if (state == kDead) return kDead;
  }
  return state;
}

const std::vector<uint64_t>& Automaton::mask(int32_t state) {
  if (auto it = mask_of_.find(state); it != mask_of_.end()) return masks_[it->second];
  const size_t words = (size_t(trie_->n_vocab()) + 63) / 64;
  if ((masks_.size() + 1) * words * 8 > kMaskCacheBytes) {
    masks_.clear();
    mask_of_.clear();
  }
  std::vector<uint64_t> m(words, 0);
  const TokenTrie& t = *trie_;
  const uint8_t* bytes = t.bytes().data();
  const uint16_t* depth = t.depths().data();
  const int32_t* end = t.ends().data();
  const int32_t* tb = t.token_begin().data();
  const int32_t* ids = t.token_ids().data();
  int32_t* walk = walk_.data();
  walk[0] = state;
  const int32_t n = t.n_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t s = next(walk[depth[i] - 1], bytes[i]);
    if (s == kDead) {
      i = end[i];
      continue;
    }
    walk[depth[i]] = s;
    for (int32_t k = tb[i]; k < tb[i + 1]; ++k) m[size_t(ids[k]) >> 6] |= uint64_t(1) << (ids[k] & 63);
    ++i;
  }
  if (complete(state))
    for (int32_t id : t.eog()) m[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  mask_of_[state] = masks_.size();
  masks_.push_back(std::move(m));
  return masks_.back();
}

const std::vector<uint64_t>& Matcher::allowed() {
  if (ended_) {
    none_.assign((size_t(a_->trie().n_vocab()) + 63) / 64, 0);
    return none_;
  }
  return a_->mask(state_);
}

bool Matcher::accept(int32_t token) {
  if (ended_ || token < 0 || token >= a_->trie().n_vocab()) return false;
  if (a_->is_eog(token)) {
    if (!a_->complete(state_)) return false;
    ended_ = true;
    return true;
  }
  const std::string& piece = a_->trie().piece(token);
  if (piece.empty()) return false;
  const int32_t s = a_->advance(state_, piece);
  if (s == Automaton::kDead) return false;
  state_ = s;
  return true;
}

}  // namespace pc::grammar
