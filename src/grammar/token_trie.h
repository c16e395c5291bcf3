// The vocabulary as a byte trie, laid out for one forward walk.
//
// Nodes are in depth-first preorder; node 0 is the root (the empty string).
//
//   node      byte   depth   end (one past its subtree)   tokens ending here
//   0  root    -       0       n                           -
//   1  "a"    'a'      1       4                           [id of "a"]
//   2  "ab"   'b'      2       3                           [id of "ab"]
//   3  "ac"   'c'      2       4                           ...
//
// A walk visits i = 1, 2, ...; rejecting node i skips to end[i]. Its parent's state
// is the one last set at depth[i] - 1, since preorder visits a parent before its
// children and after any earlier sibling's subtree. Tokens with no bytes (control
// tokens) are not in the trie; end-of-generation tokens are listed apart.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pc::grammar {

class TokenTrie {
 public:
  // pieces[id] = the bytes token id stands for; eog = end-of-generation ids.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog);

  int32_t n_vocab() const { return n_vocab_; }
  int32_t n_nodes() const { return int32_t(byte_.size()); }
  const std::vector<uint8_t>& bytes() const { return byte_; }
  const std::vector<uint16_t>& depths() const { return depth_; }
  const std::vector<int32_t>& ends() const { return end_; }
  // Tokens ending at node i: token_ids()[token_begin()[i] .. token_begin()[i + 1]).
  const std::vector<int32_t>& token_begin() const { return tok_begin_; }
  const std::vector<int32_t>& token_ids() const { return tok_ids_; }
  const std::vector<int32_t>& eog() const { return eog_; }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  int32_t max_depth() const { return max_depth_; }

 private:
  int32_t n_vocab_ = 0;
  int32_t max_depth_ = 0;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> end_;
  std::vector<int32_t> tok_begin_;
  std::vector<int32_t> tok_ids_;
  std::vector<int32_t> eog_;
  std::vector<std::string> pieces_;
};

}  // namespace pc::grammar
