#include "tokenizer/spm_tokenizer.h"

#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace pc {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" U+2581

// A run of the escaped text; merged-away symbols have n == 0 and are unlinked.
struct Symbol {
  int32_t start;  // byte offset into the escaped text
  int32_t n;      // byte length
  int32_t prev, next;  // neighbours in the live list, -1 at the ends
  int32_t id;     // token of this run once formed by a merge; -1 for unmerged characters
};

struct Bigram {
  float score;
  int32_t left;   // index of the left symbol; the right one is symbols[left].next
  int32_t size;   // byte length of the pair when queued (staleness check)
  int32_t id;
};

// Max-heap order: higher score first; equal scores → lower left index first.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab v) : VocabTokenizer(std::move(v)) {
  byte_id_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    auto it = v_.id_of.find(std::string_view(buf));
    if (it != v_.id_of.end()) {
      byte_id_[b] = it->second;
      has_byte_tokens_ = true;
    }
  }
}

void SpmTokenizer::encode_raw(std::string_view raw, bool after_special,
                              std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 16);
  if (v_.add_space_prefix && after_special) text += kSpace;
  for (char c : raw) {
    if (c == ' ') text += kSpace;
    else text += c;
  }
  if (text.size() > static_cast<size_t>(INT32_MAX)) throw Error("text too long to tokenize");

  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = unicode::utf8_char_len(text, off);
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<int32_t>(off), static_cast<int32_t>(len), i - 1, -1, -1});
    if (i > 0) sym[i - 1].next = i;
    off += len;
  }

  std::vector<Bigram> heap_storage;
  heap_storage.reserve(sym.size());
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue(BigramLess{},
                                                                     std::move(heap_storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t size = sym[left].n + sym[right].n;
    const int32_t id = v_.text_id(std::string_view(text).substr(sym[left].start, size));
    if (id < 0) return;
    queue.push({v_.score[id], left, size, id});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    // The pair is stale if either side was merged since it was queued. The left
    // symbol can only grow by absorbing its right neighbour, so an unchanged
    // total size with both sides alive means the same pair.
    if (l.n == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    l.id = b.id;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    // An unmerged character: a token itself, or spelled with byte tokens.
    const std::string_view piece = std::string_view(text).substr(s.start, s.n);
    if (const int32_t id = v_.text_id(piece); id >= 0) {
      out.push_back(id);
    } else if (has_byte_tokens_) {
      for (char c : piece) {
        const int32_t bid = byte_id_[static_cast<uint8_t>(c)];
        if (bid >= 0) out.push_back(bid);
        else if (v_.unk >= 0) out.push_back(v_.unk);
      }
    } else if (v_.unk >= 0) {
      out.push_back(v_.unk);  // one unknown token per character, as SentencePiece
    }
  }
}

std::string SpmTokenizer::token_to_piece(int32_t id) const {
  const std::string& t = token_text(id);
  switch (v_.type[id]) {
    case TokenType::kNormal: {
      std::string s;
      s.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        if (t.compare(i, kSpace.size(), kSpace) == 0) {
          s += ' ';
          i += kSpace.size();
        } else {
          s += t[i++];
        }
      }
      return s;
    }
    case TokenType::kByte: {
      // "<0xXX>"; a byte-typed token with any other text reads as its text.
      unsigned b = 0;
      if (t.size() == 6 && std::sscanf(t.c_str(), "<0x%2X>", &b) == 1)
        return std::string(1, static_cast<char>(b));
      return t;
    }
    case TokenType::kUserDefined:
    case TokenType::kUnknown:
      return t;
    case TokenType::kControl:
    case TokenType::kUnused:
      return {};
  }
  return {};
}

}  // namespace pc
