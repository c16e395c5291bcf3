#include "grammar/gbnf_parser.h"

#include <map>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace pc::grammar {

namespace {

using Symbol = GrammarBuilder::Symbol;
using Seq = std::vector<Symbol>;

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  std::shared_ptr<const Grammar> run() {
    int32_t root = -1;
    for (;;) {
      skip_space(true);
      if (at_end()) break;
      const size_t name_at = pos_;
      const std::string name = parse_name();
      skip_space(false);
      if (!eat("::=")) fail("expected '::=' after rule name '" + name + "'");
      const int32_t r = b_.rule(name);
      if (b_.defined(r)) fail("rule '" + name + "' is defined twice", name_at);
      b_.mark_defined(r);
      if (name == "root") root = r;
      skip_space(true);
      parse_alternatives(r, false);
      skip_space(false);
      if (!at_end() && peek() != '\n') fail("unexpected character '" + std::string(1, peek()) + "'");
    }
    if (root < 0) throw GrammarError("the grammar has no 'root' rule");
    return b_.build(root, std::string(t_));
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at = std::string_view::npos) const {
    if (at == std::string_view::npos) at = pos_;
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("grammar line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  bool at_end() const { return pos_ >= t_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < t_.size() ? t_[pos_ + k] : '\0'; }
  bool eat(std::string_view s) {
    if (t_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Skips blanks and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // True when, after blank lines and comments, the next line continues with '|'.
  bool continues_with_bar() {
    const size_t save = pos_;
    skip_space(true);
    const bool yes = peek() == '|';
    if (!yes) pos_ = save;
    return yes;
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && name_char(peek())) ++pos_;
    if (pos_ == start) fail(at_end() ? "expected a rule name" : "expected a rule name, found '" + std::string(1, peek()) + "'");
    return std::string(t_.substr(start, pos_ - start));
  }

  // One code point of the source text (UTF-8), or an escape.
  uint32_t parse_char() {
    const size_t at = pos_;
    const uint8_t c = uint8_t(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': return uint8_t(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: fail("unknown escape '\\" + std::string(1, e) + "'", at);
      }
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > t_.size()) fail("invalid UTF-8 in the grammar text");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      const uint8_t x = uint8_t(t_[pos_ + k]);
      if ((x & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (x & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) fail("code point out of range");
    return v;
  }

  // Symbols matching one character of `ranges` (code points): one byte set when every
  // encoding is one byte, else a rule with one alternative per UTF-8 sequence.
  Seq char_class(std::vector<CodeRange> ranges, bool negate) {
    ranges = normalize(std::move(ranges), negate);
    std::string key = negate ? "^" : "";
    for (auto [lo, hi] : ranges) key += std::to_string(lo) + "-" + std::to_string(hi) + ",";
    auto it = class_rules_.find(key);
    if (it != class_rules_.end()) return {it->second};
    const auto seqs = utf8_sequences(ranges);
    Symbol ascii;
    std::vector<Seq> multi;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        for (int x = s[0].first; x <= s[0].second; ++x) ascii.bytes[x >> 6] |= uint64_t(1) << (x & 63);
        continue;
      }
      Seq seq;
      for (auto [lo, hi] : s) {
        Symbol sym;
        for (int x = lo; x <= hi; ++x) sym.bytes[x >> 6] |= uint64_t(1) << (x & 63);
        seq.push_back(sym);
      }
      multi.push_back(std::move(seq));
    }
    if (multi.empty()) {
      if (ascii.bytes == ByteSet{}) fail("a character class matches nothing");
      return {ascii};
    }
    const int32_t r = b_.fresh_rule("char");
    if (ascii.bytes != ByteSet{}) b_.add_alt(r, {ascii});
    for (const Seq& s : multi) b_.add_alt(r, s);
    Symbol ref{true, r, {}};
    class_rules_[key] = ref;
    return {ref};
  }

  Seq parse_literal() {
    ++pos_;  // "
    Seq seq;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') fail("unterminated string literal");
      std::vector<uint8_t> bytes;
      append_utf8(parse_char(), bytes);
      for (uint8_t x : bytes) {
        Symbol s;
        s.bytes[x >> 6] |= uint64_t(1) << (x & 63);
        seq.push_back(s);
      }
    }
    ++pos_;
    return seq;
  }

  Seq parse_class() {
    ++pos_;  // [
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    std::vector<CodeRange> ranges;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        if (at_end()) fail("unterminated character class");
        hi = parse_char();
        if (hi < lo) fail("character range is out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return char_class(std::move(ranges), negate);
  }

  int parse_int() {
    const size_t start = pos_;
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepetition) fail("repetition bound exceeds " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return int(v);
  }

  // `item` as one symbol (a new rule when it is several).
  Symbol as_symbol(const Seq& item, const std::string base) {
    if (item.size() == 1) return item[0];
    const int32_t r = b_.fresh_rule(base);
    b_.add_alt(r, item);
    return Symbol{true, r, {}};
  }

  // item{min,max} (max < 0: no maximum) appended to `out`.
  void repeat(const Seq& item, int min, int max, const std::string base, Seq& out) {
    if (item.empty()) return;  // an empty group repeated is empty
    const Symbol x = as_symbol(item, base);
    for (int i = 0; i < min; ++i) out.push_back(x);
    if (max < 0) {  // star: S ::= x S | ε
      const int32_t s = b_.fresh_rule(base);
      b_.add_alt(s, {x, Symbol{true, s, {}}});
      b_.add_alt(s, {});
      out.push_back(Symbol{true, s, {}});
      return;
    }
    // Optional tail of max - min: O_k ::= x O_{k-1} | ε, O_1 ::= x | ε.
    int32_t prev = -1;
    for (int k = 1; k <= max - min; ++k) {
      const int32_t o = b_.fresh_rule(base);
      if (prev < 0)
        b_.add_alt(o, {x});
      else
        b_.add_alt(o, {x, Symbol{true, prev, {}}});
      b_.add_alt(o, {});
      prev = o;
    }
    if (prev >= 0) out.push_back(Symbol{true, prev, {}});
  }

  // Sequence items until '|', ')' or the end of the rule; `nested`: inside a group,
  // where newlines are blanks.
  Seq parse_sequence(int32_t rule, bool nested) {
    Seq seq;
    for (;;) {
      skip_space(nested);
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || c == '\n') break;
      Seq item;
      if (c == '"') {
        item = parse_literal();
      } else if (c == '[') {
        item = parse_class();
      } else if (c == '.') {
        ++pos_;
        item = char_class({{0, kMaxCodePoint}}, false);
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) fail("groups nest more than " + std::to_string(kMaxNesting) + " deep");
        ++pos_;
        const int32_t g = b_.fresh_rule(b_.name(rule));
        parse_alternatives(g, true);
        skip_space(true);
        if (peek() != ')') fail("expected ')'");
        ++pos_;
        --depth_;
        item = {Symbol{true, g, {}}};
      } else if (c == '<' || c == '!') {
        fail("token references (<...>) are not supported; write the text as a literal");
      } else if (name_char(c)) {
        const size_t at = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (t_.substr(pos_, 3) == "::=") {  // the next rule starts: this line ended
          pos_ = at;
          fail("expected a newline before rule '" + name + "'");
        }
        item = {Symbol{true, b_.rule(name), {}}};
      } else {
        fail("unexpected character '" + std::string(1, c) + "'");
      }
      // Postfix repetition operators, possibly several ("x?*").
      for (;;) {
        const char op = peek();
        if (op == '*') {
          ++pos_;
          Seq r;
          repeat(item, 0, -1, b_.name(rule), r);
          item = r;
        } else if (op == '+') {
          ++pos_;
          Seq r;
          repeat(item, 1, -1, b_.name(rule), r);
          item = r;
        } else if (op == '?') {
          ++pos_;
          Seq r;
          repeat(item, 0, 1, b_.name(rule), r);
          item = r;
        } else if (op == '{') {
          ++pos_;
          skip_space(false);
          const int min = parse_int();
          int max = min;
          skip_space(false);
          if (peek() == ',') {
            ++pos_;
            skip_space(false);
            max = (peek() == '}') ? -1 : parse_int();
            skip_space(false);
          }
          if (peek() != '}') fail("expected '}'");
          ++pos_;
          if (max >= 0 && max < min) fail("repetition maximum is below its minimum");
          Seq r;
          repeat(item, min, max, b_.name(rule), r);
          item = r;
        } else {
          break;
        }
      }
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  void parse_alternatives(int32_t rule, bool nested) {
    for (;;) {
      b_.add_alt(rule, parse_sequence(rule, nested));
      if (peek() == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      if (!nested && peek() == '\n' && continues_with_bar()) {
        ++pos_;
        skip_space(true);
        continue;
      }
      break;
    }
  }

  static constexpr int kMaxNesting = 1000;
  std::string_view t_;
  size_t pos_ = 0;
  int depth_ = 0;  // open groups
  GrammarBuilder b_;
  std::map<std::string, Symbol> class_rules_;  // multi-byte classes already lowered
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace pc::grammar
