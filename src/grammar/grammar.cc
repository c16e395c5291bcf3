#include "grammar/grammar.h"

#include <climits>

namespace pc::grammar {

int32_t GrammarBuilder::rule(const std::string& name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  ids_[name] = int32_t(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  alts_.emplace_back();
  return int32_t(names_.size() - 1);
}

int32_t GrammarBuilder::fresh_rule(std::string base) {
  const int32_t id = int32_t(names_.size());
  names_.push_back(base + "-" + std::to_string(++fresh_));
  defined_.push_back(true);
  alts_.emplace_back();
  return id;
}

int32_t GrammarBuilder::set_id(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i] == s) return int32_t(i);
  sets_.push_back(s);
  return int32_t(sets_.size() - 1);
}

void GrammarBuilder::add_alt(int32_t rule, const std::vector<Symbol>& seq) {
  std::vector<Grammar::Elem> alt;
  alt.reserve(seq.size());
  for (const Symbol& s : seq) {
    if (s.is_rule) {
      alt.push_back({Grammar::Op::kRule, s.rule});
    } else {
      if (s.bytes == ByteSet{}) throw GrammarError("a character class in rule '" + names_[rule] + "' matches nothing");
      alt.push_back({Grammar::Op::kBytes, set_id(s.bytes)});
    }
  }
  alts_[rule].push_back(std::move(alt));
}

std::shared_ptr<const Grammar> GrammarBuilder::build(int32_t root, std::string source) {
  for (size_t r = 0; r < names_.size(); ++r)
    if (!defined_[r]) throw GrammarError("rule '" + names_[r] + "' is used but not defined");
  if (root < 0 || root >= int32_t(names_.size())) throw GrammarError("the grammar has no 'root' rule");
  auto g = std::make_shared<Grammar>();
  g->names = names_;
  g->sets = sets_;
  g->root = root;
  g->source = std::move(source);
  g->alts.resize(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    for (const auto& alt : alts_[r]) {
      g->alts[r].push_back(int32_t(g->elems.size()));
      g->elems.insert(g->elems.end(), alt.begin(), alt.end());
      g->elems.push_back({Grammar::Op::kEnd, int32_t(r)});
    }
  }
  check(*g);
  return g;
}

namespace {

// The least set of rules with an alternative whose every element holds: rule
// references whose rule is in the set, and byte sets when `bytes_hold`. A worklist
// over reverse references: linear in the grammar's size, however the rules chain.
std::vector<bool> fixpoint(const Grammar& g, bool bytes_hold) {
  struct Alt {
    int32_t rule;
    int32_t missing;  // rule references not yet known to hold
  };
  std::vector<Alt> alts;
  std::vector<std::vector<int32_t>> users(g.n_rules());  // rule → alts referring to it (once per reference)
  std::vector<bool> yes(g.n_rules(), false);
  std::vector<int32_t> done;
  for (int32_t r = 0; r < g.n_rules(); ++r) {
    for (int32_t a : g.alts[r]) {
      Alt alt{r, 0};
      bool blocked = false;
      for (int32_t e = a; g.elems[e].op != Grammar::Op::kEnd; ++e) {
        if (g.elems[e].op == Grammar::Op::kBytes) {
          blocked = blocked || !bytes_hold;
        } else {
          ++alt.missing;
          users[g.elems[e].arg].push_back(int32_t(alts.size()));
        }
      }
      if (blocked) alt.missing = INT32_MAX;
      if (alt.missing == 0 && !yes[r]) {
        yes[r] = true;
        done.push_back(r);
      }
      alts.push_back(alt);
    }
  }
  while (!done.empty()) {
    const int32_t x = done.back();
    done.pop_back();
    for (int32_t ai : users[x]) {
      Alt& alt = alts[ai];
      if (alt.missing == INT32_MAX || --alt.missing != 0 || yes[alt.rule]) continue;
      yes[alt.rule] = true;
      done.push_back(alt.rule);
    }
  }
  return yes;
}

bool refers_to(const Grammar& g, int32_t r, int32_t x) {
  for (int32_t a : g.alts[r])
    for (int32_t e = a; g.elems[e].op != Grammar::Op::kEnd; ++e)
      if (g.elems[e].op == Grammar::Op::kRule && g.elems[e].arg == x) return true;
  return false;
}

}  // namespace

void check(const Grammar& g) {
  using Op = Grammar::Op;
  // Nullable: derives the empty string. Productive: derives some finite byte string.
  const std::vector<bool> nullable = fixpoint(g, /*bytes_hold=*/false);
  const std::vector<bool> productive = fixpoint(g, /*bytes_hold=*/true);
  // Left edges: r → x when x can come first in r (after nullable rules only).
  std::vector<std::vector<int32_t>> left(g.n_rules());
  for (int32_t r = 0; r < g.n_rules(); ++r)
    for (int32_t a : g.alts[r])
      for (int32_t e = a; g.elems[e].op == Op::kRule; ++e) {
        left[r].push_back(g.elems[e].arg);
        if (!nullable[g.elems[e].arg]) break;
      }
  // Cycle search, iterative DFS (grammars from schemas may nest deeply).
  std::vector<uint8_t> color(g.n_rules(), 0);  // 0 new, 1 on the path, 2 done
  for (int32_t start = 0; start < g.n_rules(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int32_t, size_t>> path{{start, 0}};
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == left[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const int32_t x = left[r][i++];
      if (color[x] == 1)
        throw GrammarError("rule '" + g.names[x] + "' is left-recursive (it can reach itself before any character)");
      if (color[x] == 0) {
        color[x] = 1;
        path.push_back({x, 0});
      }
    }
  }
  // Every rule reachable from the root must be able to finish.
  std::vector<bool> seen(g.n_rules(), false);
  std::vector<int32_t> todo{g.root};
  seen[g.root] = true;
  int32_t stuck = -1;  // a reachable rule that cannot finish; one that refers to itself if any
  while (!todo.empty()) {
    const int32_t r = todo.back();
    todo.pop_back();
    if (!productive[r] && (stuck < 0 || refers_to(g, r, r))) stuck = r;
    for (int32_t a : g.alts[r])
      for (int32_t e = a; g.elems[e].op != Op::kEnd; ++e)
        if (g.elems[e].op == Op::kRule && !seen[g.elems[e].arg]) {
          seen[g.elems[e].arg] = true;
          todo.push_back(g.elems[e].arg);
        }
  }
  if (stuck >= 0)
    throw GrammarError("rule '" + g.names[stuck] + "' can never finish (each of its alternatives recurses without end)");
}

}  // namespace pc::grammar
