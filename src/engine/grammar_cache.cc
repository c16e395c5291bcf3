#include "engine/grammar_cache.h"

#include "tokenizer/tokenizer.h"

namespace pc {

const std::shared_ptr<const grammar::TokenTrie>& GrammarCache::trie() {
  if (!trie_) {
    const int32_t V = tok_.n_vocab();
    std::vector<std::string> pieces(V);
    std::vector<int32_t> eog;
    for (int32_t id = 0; id < V; ++id) {
      // Control tokens have no text of their own: only end-of-generation ones are
      // ever allowed, when the grammar is complete.
      if (!tok_.is_control(id)) pieces[id] = tok_.token_to_piece(id);
      if (tok_.is_eog(id)) {
        eog.push_back(id);
        pieces[id].clear();
      }
    }
    trie_ = std::make_shared<grammar::TokenTrie>(pieces, std::move(eog));
  }
  return trie_;
}

std::shared_ptr<grammar::Automaton> GrammarCache::get(const std::shared_ptr<const grammar::Grammar>& g) {
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->first != g->source) continue;
    lru_.splice(lru_.begin(), lru_, it);
    return lru_.front().second;
  }
  lru_.emplace_front(g->source, std::make_shared<grammar::Automaton>(g, trie()));
  if (lru_.size() > capacity_) lru_.pop_back();
  return lru_.front().second;
}

}  // namespace pc
