// Which tokens may come next under a grammar, and advancing on the chosen one.
//
// The grammar is a pushdown automaton over bytes. A *stack* is a chain of nodes,
// each a position in an alternative (grammar.h `elems`) and its parent, the position
// to continue at when that alternative ends; the top always points at a byte set.
// Nodes are hash-consed, so one stack is one node id. A *state* is the set of stacks
// the bytes so far can be in (several while the grammar is ambiguous), interned too,
// plus a "complete" member when the root can end here.
//
// Automaton caches, per state: its successor on each byte (a 256-entry row filled on
// demand, so a state's transitions are computed once) and its token mask. A mask is
// one walk of the vocabulary trie (token_trie.h) that follows those rows and skips
// every subtree whose prefix the grammar rejects: after the first visit of a state, a
// walk costs one array load per trie node visited, and the mask of a state seen before
// (the inside of a string, a run of digits) costs nothing. One Automaton serves every
// sequence using the same grammar and vocabulary; it is not thread-safe (the engine
// thread owns it).
//
// The mask depends only on the state, and the state only on the bytes accepted, so
// the same generated tokens always give the same masks (cached or not).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"

namespace pc::grammar {

class Automaton {
 public:
  static constexpr int32_t kDead = 0;  // the empty state: nothing can follow
  // A byte that would lead to a state of more stacks than this (a grammar ambiguous
  // enough to cost a request seconds per token) is refused like a rejected one.
  static constexpr size_t kMaxStacks = 4096;

  Automaton(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> trie);

  int32_t start() const { return start_; }
  int32_t next(int32_t state, uint8_t byte) {
    const int32_t r = rows_[size_t(state) * 256 + byte];
    return r >= 0 ? r : compute_next(state, byte);
  }
  int32_t advance(int32_t state, std::string_view bytes);
  bool complete(int32_t state) const { return !states_[state].empty() && states_[state][0] == kComplete; }
  // Complete, and no byte can follow.
  bool finished(int32_t state) const { return complete(state) && states_[state].size() == 1; }
  // Allowed tokens as bits (bit id of word id / 64): tokens whose bytes the grammar
  // accepts from `state`, and the end-of-generation tokens when it is complete. Valid
  // until the next mask() call.
  const std::vector<uint64_t>& mask(int32_t state);
  bool is_eog(int32_t token) const { return token >= 0 && token < int32_t(is_eog_.size()) && is_eog_[token]; }

  const Grammar& grammar() const { return *g_; }
  const TokenTrie& trie() const { return *trie_; }
  size_t n_states() const { return states_.size(); }
  size_t n_stack_nodes() const { return nodes_.size(); }

 private:
  static constexpr int32_t kRoot = -1;      // parent of the root's frame
  static constexpr int32_t kComplete = -1;  // state member: the root has ended
  static constexpr int32_t kUnknown = -1;   // row entry not computed yet
  struct Node {
    int32_t pos, parent;
  };
  int32_t node(int32_t pos, int32_t parent);
  int32_t intern_state(std::vector<int32_t>& stacks);  // sorts and dedups
  void expand(int32_t pos, int32_t parent, std::vector<int32_t>& out);
  int32_t compute_next(int32_t state, uint8_t byte);

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<uint8_t> is_eog_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> states_;  // sorted stack ids (kComplete first)
  std::unordered_map<std::string, int32_t> state_ids_;  // by the bytes of the vector
  std::vector<int32_t> rows_;                 // [state * 256 + byte] → state, kUnknown
  int32_t start_ = kDead;
  std::unordered_set<uint64_t> expanded_;     // (pos, parent) keys seen by one expand pass
  std::unordered_map<int32_t, size_t> mask_of_;  // state → index in masks_
  std::vector<std::vector<uint64_t>> masks_;
  std::vector<int32_t> walk_;                 // [depth] → state, for mask()
};

// One sequence's place in a grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<Automaton> a) : a_(std::move(a)), state_(a_->start()) {}
  // The tokens allowed next (Automaton::mask); all zero once ended.
  const std::vector<uint64_t>& allowed();
  // Advances on `token`; false (and no change) when it is not allowed. An
  // end-of-generation token is allowed when the grammar is complete, and ends it.
  bool accept(int32_t token);
  bool complete() const { return ended_ || a_->complete(state_); }
  // Nothing more can follow: generation should stop.
  bool finished() const { return ended_ || a_->finished(state_); }
  bool is_eog(int32_t token) const { return a_->is_eog(token); }

 private:
  std::shared_ptr<Automaton> a_;
  int32_t state_;
  bool ended_ = false;
  std::vector<uint64_t> none_;
};

inline bool allows(const std::vector<uint64_t>& mask, int32_t id) { return (mask[size_t(id) >> 6] >> (id & 63)) & 1; }

}  // namespace pc::grammar
