#include "template/jinja_lexer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "template/chat_template.h"
#include "template/jinja_value.h"

namespace pc::jinja {

namespace {

class Lexer {
 public:
  Lexer(const std::string& source, const LexOptions& opts) : opts_(opts) {
    // Normalize newlines (\r\n, \r -> \n) and drop one trailing newline.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      char c = source[i];
      if (c == '\r') {
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        src_ += '\n';
      } else {
        src_ += c;
      }
    }
    if (!opts_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t n = src_.size();
    size_t pos = 0;
    while (pos < n) {
      size_t start = find_tag_start(pos);
      if (start == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      char kind = src_[start + 1];
      char sign = start + 2 < n && (src_[start + 2] == '-' || src_[start + 2] == '+') ? src_[start + 2] : 0;
      std::string text = src_.substr(pos, start - pos);
      bool line_starting = pos == 0 || src_[pos - 1] == '\n';

      size_t raw_end = std::string::npos;
      if (kind == '%') raw_end = match_raw_begin(start + 2 + (sign ? 1 : 0));

      apply_lstrip(text, sign, kind != '{', line_starting);
      emit_data(text, pos);

      if (raw_end != std::string::npos) {
        pos = lex_raw(raw_end, start);
        continue;
      }
      size_t p = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(p, start);
      } else {
        pos = lex_tag(p, start, kind == '%');
      }
    }
    Token eof{TokType::Eof, "", 0, 0, 0, 0};
    locate(eof, src_.size());
    toks_.push_back(eof);
    return std::move(toks_);
  }

 private:
  [[noreturn]] void error(const std::string& msg, size_t offset) {
    int line, col;
    line_col(offset, line, col);
    throw ChatTemplateError("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + msg,
                            line, col);
  }

  void line_col(size_t offset, int& line, int& col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    line = static_cast<int>(idx + 1);
    col = static_cast<int>(offset - line_starts_[idx] + 1);
  }

  void locate(Token& t, size_t offset) const { line_col(offset, t.line, t.col); }

  size_t find_tag_start(size_t pos) const {
    size_t n = src_.size();
    for (size_t i = src_.find('{', pos); i != std::string::npos && i + 1 < n; i = src_.find('{', i + 1)) {
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  // Python's \s (Unicode whitespace) at p: returns its byte length or 0.
  size_t space_at(size_t p) const {
    unsigned char c = static_cast<unsigned char>(src_[p]);
    if (c < 0x80) return py_isspace(c) ? 1 : 0;
    size_t i = p;
    std::string_view sv(src_);
    // decode a single code point
    char32_t cp = 0;
    int len = 0;
    if ((c & 0xe0) == 0xc0) { cp = c & 0x1f; len = 2; }
    else if ((c & 0xf0) == 0xe0) { cp = c & 0x0f; len = 3; }
    else return 0;
    if (i + len > sv.size()) return 0;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(sv[i + k]);
      if ((cc & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (cc & 0x3f);
    }
    return py_isspace(cp) ? static_cast<size_t>(len) : 0;
  }
  size_t skip_spaces(size_t p) const {
    while (p < src_.size()) {
      size_t l = space_at(p);
      if (!l) break;
      p += l;
    }
    return p;
  }
  bool at(size_t p, const char* s) const { return src_.compare(p, std::strlen(s), s) == 0; }

  // `{%` already seen; p is after the optional sign. Returns the end of a
  // `raw` begin tag, or npos.
  size_t match_raw_begin(size_t p) const {
    p = skip_spaces(p);
    if (!at(p, "raw")) return std::string::npos;
    p = skip_spaces(p + 3);
    if (at(p, "-%}")) return skip_spaces(p + 3);
    if (at(p, "%}")) return p + 2;
    return std::string::npos;
  }

  // Whitespace control of the text before a tag.
  void apply_lstrip(std::string& text, char sign, bool is_block_or_comment, bool line_starting) const {
    if (sign == '-') {
      std::u32string u = utf8_decode(text);
      size_t e = u.size();
      while (e > 0 && py_isspace(u[e - 1])) --e;
      if (e != u.size()) text = utf8_encode(std::u32string_view(u).substr(0, e));
    } else if (sign != '+' && opts_.lstrip_blocks && is_block_or_comment) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        std::u32string tail = utf8_decode(std::string_view(text).substr(l_pos));
        bool all_space = !tail.empty() &&
                         std::all_of(tail.begin(), tail.end(), [](char32_t c) { return py_isspace(c); });
        if (all_space) text.resize(l_pos);
      }
    }
  }

  void emit_data(const std::string& text, size_t offset) {
    if (text.empty()) return;
    Token t{TokType::Data, text};
    locate(t, offset);
    toks_.push_back(std::move(t));
  }

  size_t lex_raw(size_t p, size_t tag_start) {
    size_t n = src_.size();
    for (size_t i = src_.find("{%", p); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t q = i + 2;
      char sign = q < n && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (sign) ++q;
      q = skip_spaces(q);
      if (!at(q, "endraw")) continue;
      q = skip_spaces(q + 6);
      size_t end;
      if (at(q, "+%}")) end = q + 3;
      else if (at(q, "-%}")) end = skip_spaces(q + 3);
      else if (at(q, "%}")) end = q + 2 + (opts_.trim_blocks && q + 2 < n && src_[q + 2] == '\n' ? 1 : 0);
      else continue;
      std::string text = src_.substr(p, i - p);
      apply_lstrip(text, sign, true, p == 0 || src_[p - 1] == '\n');
      emit_data(text, p);
      return end;
    }
    error("Missing end of raw directive", tag_start);
  }

  size_t lex_comment(size_t p, size_t tag_start) {
    size_t n = src_.size();
    for (size_t i = p; i < n; ++i) {
      if (src_[i] == '+' && at(i + 1, "#}")) return i + 3;
      if (src_[i] == '-' && at(i + 1, "#}")) return skip_spaces(i + 3);
      if (at(i, "#}")) return i + 2 + (opts_.trim_blocks && i + 2 < n && src_[i + 2] == '\n' ? 1 : 0);
    }
    error("Missing end of comment tag", tag_start);
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

  // (\d+_)*\d+ at p; returns end or npos.
  size_t match_digits(size_t p) const {
    size_t n = src_.size();
    if (p >= n || !is_digit(src_[p])) return std::string::npos;
    while (true) {
      while (p < n && is_digit(src_[p])) ++p;
      if (p + 1 < n && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t match_float(size_t p) const {
    if (p > 0 && src_[p - 1] == '.') return std::string::npos;
    size_t q = match_digits(p);
    if (q == std::string::npos) return q;
    auto exponent = [&](size_t r) -> size_t {
      if (r < src_.size() && (src_[r] == 'e' || src_[r] == 'E')) {
        ++r;
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
        return match_digits(r);
      }
      return std::string::npos;
    };
    size_t frac = std::string::npos;
    if (q < src_.size() && src_[q] == '.') frac = match_digits(q + 1);
    if (frac != std::string::npos) {
      size_t e = exponent(frac);
      return e != std::string::npos ? e : frac;
    }
    return exponent(q);
  }

  size_t match_int(size_t p, int64_t& value, bool& overflow) const {
    size_t n = src_.size();
    int base = 10;
    size_t q = p;
    if (src_[p] == '0' && p + 1 < n && std::strchr("bBoOxX", src_[p + 1]) && src_[p + 1] != 0) {
      char b = static_cast<char>(src_[p + 1] | 0x20);
      base = b == 'b' ? 2 : (b == 'o' ? 8 : 16);
      q = p + 2;
      size_t start = q;
      auto ok = [&](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      };
      while (q < n && (ok(src_[q]) || (src_[q] == '_' && q + 1 < n && ok(src_[q + 1])))) ++q;
      if (q == start) base = 10, q = p;  // plain "0"
    }
    if (base == 10) {
      if (src_[p] == '0') {
        q = p + 1;
        while (q + 1 < n && (src_[q] == '0' || (src_[q] == '_' && src_[q + 1] == '0'))) ++q;
        if (q < n && src_[q] == '0') ++q;
      } else {
        q = match_digits(p);
      }
    }
    overflow = false;
    value = 0;
    size_t digits_start = base == 10 ? p : p + 2;
    for (size_t i = digits_start; i < q; ++i) {
      char c = src_[i];
      if (c == '_') continue;
      int d = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
      if (value > (INT64_MAX - d) / base) overflow = true;
      else value = value * base + d;
    }
    return q;
  }

  std::string unescape(size_t b, size_t e) {
    std::string out;
    for (size_t i = b; i < e; ++i) {
      char c = src_[i];
      if (c != '\\' || i + 1 >= e) {
        out += c;
        continue;
      }
      char d = src_[++i];
      auto hex = [&](int count) -> char32_t {
        char32_t v = 0;
        for (int k = 0; k < count; ++k) {
          if (i + 1 >= e || !std::isxdigit(static_cast<unsigned char>(src_[i + 1])))
            error("truncated escape sequence in string literal", i);
          char h = src_[++i];
          v = v * 16 + (is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return v;
      };
      switch (d) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': utf8_append(out, hex(2)); break;
        case 'u': utf8_append(out, hex(4)); break;
        case 'U': {
          char32_t v = hex(8);
          if (v > 0x10ffff) error("illegal Unicode character in string literal", i);
          utf8_append(out, v);
          break;
        }
        default:
          if (d >= '0' && d <= '7') {
            char32_t v = d - '0';
            for (int k = 0; k < 2 && i + 1 < e && src_[i + 1] >= '0' && src_[i + 1] <= '7'; ++k)
              v = v * 8 + (src_[++i] - '0');
            utf8_append(out, v);
          } else {
            out += '\\';
            out += d;
          }
      }
    }
    return out;
  }

  size_t lex_tag(size_t p, size_t tag_start, bool block) {
    size_t n = src_.size();
    Token begin{block ? TokType::BlockBegin : TokType::VarBegin, ""};
    locate(begin, tag_start);
    toks_.push_back(begin);
    std::vector<char> balance;
    while (p < n) {
      if (balance.empty()) {
        if (block) {
          if (at(p, "+%}")) return end_tag(p, p + 3, true);
          if (at(p, "-%}")) return end_tag(p, skip_spaces(p + 3), true);
          if (at(p, "%}"))
            return end_tag(p, p + 2 + (opts_.trim_blocks && p + 2 < n && src_[p + 2] == '\n' ? 1 : 0), true);
        } else {
          if (at(p, "-}}")) return end_tag(p, skip_spaces(p + 3), false);
          if (at(p, "}}")) return end_tag(p, p + 2, false);
        }
      }
      if (size_t sp = space_at(p)) {
        p += sp;
        continue;
      }
      char c = src_[p];
      Token t{TokType::Op, ""};
      locate(t, p);
      size_t q = match_float(p);
      if (q != std::string::npos) {
        std::string s;
        for (size_t i = p; i < q; ++i)
          if (src_[i] != '_') s += src_[i];
        t.type = TokType::Float;
        t.fval = std::strtod(s.c_str(), nullptr);
        t.value = s;
        toks_.push_back(std::move(t));
        p = q;
        continue;
      }
      if (is_digit(c)) {
        int64_t v;
        bool overflow;
        q = match_int(p, v, overflow);
        if (overflow) error("integer literal too large", p);
        t.type = TokType::Int;
        t.ival = v;
        t.value = src_.substr(p, q - p);
        toks_.push_back(std::move(t));
        p = q;
        continue;
      }
      if (is_name_start(c)) {
        q = p;
        while (q < n && is_name_char(src_[q])) ++q;
        t.type = TokType::Name;
        t.value = src_.substr(p, q - p);
        toks_.push_back(std::move(t));
        p = q;
        continue;
      }
      if (c == '\'' || c == '"') {
        q = p + 1;
        while (q < n && src_[q] != c) q += src_[q] == '\\' ? 2 : 1;
        if (q >= n) error("unexpected char " + std::string(1, c) + " (unterminated string literal)", p);
        t.type = TokType::String;
        t.value = unescape(p + 1, q);
        toks_.push_back(std::move(t));
        p = q + 1;
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                   "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps)
        if (at(p, o)) {
          op = o;
          break;
        }
      if (!op) {
        std::string ch;
        utf8_append(ch, utf8_decode(std::string_view(src_).substr(p, 4))[0]);
        error("unexpected char " + py_str_repr(ch), p);
      }
      t.value = op;
      if (t.value == "{") balance.push_back('}');
      else if (t.value == "(") balance.push_back(')');
      else if (t.value == "[") balance.push_back(']');
      else if (t.value == "}" || t.value == ")" || t.value == "]") {
        if (balance.empty()) error("unexpected '" + t.value + "'", p);
        char expected = balance.back();
        balance.pop_back();
        if (expected != t.value[0])
          error("unexpected '" + t.value + "', expected '" + std::string(1, expected) + "'", p);
      }
      toks_.push_back(std::move(t));
      p += std::strlen(op);
    }
    return n;  // end of template inside a tag: the parser reports it
  }

  size_t end_tag(size_t p, size_t next, bool block) {
    Token t{block ? TokType::BlockEnd : TokType::VarEnd, ""};
    locate(t, p);
    toks_.push_back(std::move(t));
    return next;
  }

  LexOptions opts_;
  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& opts) {
  return Lexer(source, opts).run();
}

std::string describe_token(const Token& t) {
  switch (t.type) {
    case TokType::Data: return "template data / text";
    case TokType::VarBegin: return "begin of print statement";
    case TokType::VarEnd: return "end of print statement";
    case TokType::BlockBegin: return "begin of statement block";
    case TokType::BlockEnd: return "end of statement block";
    case TokType::Name: return t.value;
    case TokType::String: return "string";
    case TokType::Int: return "integer";
    case TokType::Float: return "float";
    case TokType::Op: return t.value;
    case TokType::Eof: return "end of template";
  }
  return "?";
}

}  // namespace pc::jinja
