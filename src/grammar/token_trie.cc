#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace pc::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog)
    : n_vocab_(int32_t(pieces.size())), eog_(std::move(eog)), pieces_(pieces) {
  // Sorting the pieces puts them in preorder: a string sorts before its extensions,
  // and extensions of one prefix are contiguous.
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n_vocab_; ++i)
    if (!pieces[i].empty() && pieces[i].size() < 65535) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b]; });
  byte_.push_back(0);
  depth_.push_back(0);
  std::vector<int32_t> node_tokens_count{0};
  std::vector<int32_t> path{0};  // path[d] = the node at depth d of the current string
  std::string cur;               // the string of path.back()
  std::vector<std::pair<int32_t, int32_t>> ends_at;  // (node, token)
  for (int32_t id : order) {
    const std::string& p = pieces[id];
    size_t common = 0;
    while (common < cur.size() && common < p.size() && cur[common] == p[common]) ++common;
    path.resize(common + 1);
    cur.resize(common);
    for (size_t d = common; d < p.size(); ++d) {
      byte_.push_back(uint8_t(p[d]));
      depth_.push_back(uint16_t(d + 1));
      path.push_back(int32_t(byte_.size() - 1));
      cur.push_back(p[d]);
    }
    ends_at.push_back({path.back(), id});
    max_depth_ = std::max<int32_t>(max_depth_, int32_t(p.size()));
  }
  const int32_t n = int32_t(byte_.size());
  // end[i]: the next node at depth <= depth[i] (a stack pass).
  end_.assign(n, n);
  std::vector<int32_t> open;
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() && depth_[open.back()] >= depth_[i]) {
      end_[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  // Tokens grouped by node (ends_at is already in node order: preorder, sorted input).
  tok_begin_.assign(n + 1, 0);
  for (auto [node, id] : ends_at) ++tok_begin_[node + 1];
  std::partial_sum(tok_begin_.begin(), tok_begin_.end(), tok_begin_.begin());
  tok_ids_.resize(ends_at.size());
  std::vector<int32_t> fill(tok_begin_.begin(), tok_begin_.end() - 1);
  for (auto [node, id] : ends_at) tok_ids_[fill[node]++] = id;
}

}  // namespace pc::grammar
