// The engine's automata for constrained decoding (grammar/matcher.h), one per
// grammar text, over the model's vocabulary as a token trie built on first use.
// Requests with the same grammar (an agent sending one schema again and again) share
// an automaton, so its states' transitions and masks are computed once.
// Engine thread only.
#pragma once
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace pc {

class Tokenizer;

class GrammarCache {
 public:
  explicit GrammarCache(const Tokenizer& tok, size_t capacity = 8) : tok_(tok), capacity_(capacity) {}
  // The automaton of `g` (its source text is the key); the least recently used one
  // is dropped beyond `capacity` (sequences using it keep it alive).
  std::shared_ptr<grammar::Automaton> get(const std::shared_ptr<const grammar::Grammar>& g);
  const std::shared_ptr<const grammar::TokenTrie>& trie();

 private:
  const Tokenizer& tok_;
  size_t capacity_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  std::list<std::pair<std::string, std::shared_ptr<grammar::Automaton>>> lru_;  // most recent first
};

}  // namespace pc
