#include "tokenizer/bpe_tokenizer.h"

#include <queue>

#include "tokenizer/unicode.h"

namespace pc {

namespace {

struct Symbol {
  int32_t start;       // byte offset into the mapped word
  int32_t n;           // byte length; 0 once merged into its left neighbour
  int32_t prev, next;  // live neighbours, -1 at the ends
};

struct Bigram {
  int32_t rank;
  int32_t left;  // the right symbol is symbols[left].next while the pair is current
  int32_t size;  // byte length of the pair when queued (staleness check)
};

// Max-heap order: lowest rank first; equal ranks → lower left index first.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(Vocab v, const std::vector<std::string>& merges,
                           std::unique_ptr<PreTokenizer> pre, bool ignore_merges)
    : VocabTokenizer(std::move(v)), pre_(std::move(pre)), ignore_merges_(ignore_merges) {
  rank_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // Split at the first space after position 0; mapped text contains no real
    // spaces, so the key "left right" is unambiguous.
    if (m.size() < 3 || m.find(' ', 1) == std::string::npos)
      throw Error("tokenizer.ggml.merges[" + std::to_string(i) + "] is not \"left right\": \"" +
                  m + "\"");
    rank_.emplace(m, static_cast<int32_t>(i));
  }
}

void BpeTokenizer::encode_raw(std::string_view text, bool, std::vector<int32_t>& out) const {
  std::vector<std::string_view> words;
  pre_->split(text, words);
  std::string mapped;
  for (std::string_view w : words) {
    mapped.clear();
    for (char c : w) mapped += unicode::byte_to_unicode(static_cast<uint8_t>(c));
    encode_word(mapped, out);
  }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const int32_t id = v_.text_id(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > static_cast<size_t>(INT32_MAX)) throw Error("word too long to tokenize");

  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t off = 0; off < word.size();) {
    const size_t len = unicode::utf8_char_len(word, off);
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<int32_t>(off), static_cast<int32_t>(len), i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
    off += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  std::string key;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    key.assign(word, sym[left].start, sym[left].n);
    key += ' ';
    key.append(word, sym[right].start, sym[right].n);
    auto it = rank_.find(key);
    if (it == rank_.end()) return;
    queue.push({it->second, left, sym[left].n + sym[right].n});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    // Stale if either side changed since queued: the left symbol only grows by
    // absorbing its right neighbour, so equal total size with both alive means
    // the very same pair.
    if (l.n == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = std::string_view(word).substr(sym[i].start, sym[i].n);
    if (const int32_t id = v_.text_id(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge result missing from the vocabulary (malformed file) or a mapped
    // byte with no token: fall back to one token per character where possible.
    for (size_t k = 0; k < piece.size();) {
      const size_t len = unicode::utf8_char_len(piece, k);
      const int32_t id = v_.text_id(piece.substr(k, len));
      if (id >= 0) out.push_back(id);
      else if (v_.unk >= 0) out.push_back(v_.unk);
      k += len;
    }
  }
}

std::string BpeTokenizer::token_to_piece(int32_t id) const {
  const std::string& t = token_text(id);
  switch (v_.type[id]) {
    case TokenType::kNormal:
    case TokenType::kByte: {
      // Inverse of bytes_to_unicode; characters outside the mapping (not
      // produced by byte-level encoding) are kept as they are.
      std::string s;
      s.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const uint32_t cp = unicode::decode_utf8(t, i, len);
        const int b = unicode::unicode_to_byte(cp);
        if (b >= 0 && len > 0 && !(len == 1 && cp >= 0x80)) s += static_cast<char>(b);
        else s.append(t, i, len);
        i += len;
      }
      return s;
    }
    case TokenType::kUserDefined:  // stored as plain text, not byte-mapped
    case TokenType::kUnknown:
      return t;
    case TokenType::kControl:
    case TokenType::kUnused:
      return {};
  }
  return {};
}

}  // namespace pc
