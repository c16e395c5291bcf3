#include "template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace pc::jinja {

void fail(const std::string& msg) { throw RuntimeError(msg); }

const std::string& Value::undefined_message() const {
  static const std::string kDefault = "value is undefined";
  return s_ ? *s_ : kDefault;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_->empty();
    case Kind::List: return !l_->empty();
    case Kind::Dict: return is_namespace() || d_->size() != 0;
    case Kind::Func: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return is_tuple() ? "tuple" : "list";
    case Kind::Dict: return is_namespace() ? "Namespace" : (fn_ ? "LoopContext" : "dict");
    case Kind::Func: return "function";
  }
  return "object";
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return *s_;
    default: return repr();
  }
}

namespace {

// Provenance of a serialization (repr, JSON) of nested values: each tagged
// value opens a range at its first byte and closes it after its last; ranges
// are kept in pre-order, so painting them in order lets an item's part
// override its container's.
struct Painter {
  struct Range {
    size_t begin, end;
    int32_t part;
  };
  std::vector<Range> ranges;

  static constexpr size_t kNone = static_cast<size_t>(-1);
  // The part of v's whole serialization (a mixed string: its first part).
  static int32_t part_of(const Value& v) {
    if (v.part() != kNoPart) return v.part();
    if (v.runs() && !v.runs()->empty()) return v.runs()->front().part;
    return kNoPart;
  }
  size_t open(const Value& v, size_t at) {
    int32_t p = part_of(v);
    if (p == kNoPart) return kNone;
    ranges.push_back({at, at, p});
    return ranges.size() - 1;
  }
  void close(size_t i, size_t at) {
    if (i != kNone) ranges[i].end = at;
  }
  Runs finish(size_t len) const {
    Runs out;
    if (ranges.empty()) return out;
    std::vector<int32_t> owner(len, kNoPart);
    for (const Range& r : ranges) std::fill(owner.begin() + r.begin, owner.begin() + r.end, r.part);
    for (size_t i = 0; i < len;) {
      size_t j = i;
      while (j < len && owner[j] == owner[i]) ++j;
      push_run(out, i, j, owner[i]);
      i = j;
    }
    return out;
  }
};

void repr_into(const Value& v, std::string& out, Painter* painter) {
  size_t range = painter ? painter->open(v, out.size()) : Painter::kNone;
  switch (v.kind()) {
    case Kind::Undefined: out += "Undefined"; break;
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += v.as_bool() ? "True" : "False"; break;
    case Kind::Int: out += std::to_string(v.as_int()); break;
    case Kind::Float: out += py_float_repr(v.as_float()); break;
    case Kind::String: out += py_str_repr(v.as_string()); break;
    case Kind::List: {
      const ValueList& l = v.as_list();
      out += v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += ", ";
        repr_into(l[i], out, painter);
      }
      if (v.is_tuple() && l.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      break;
    }
    case Kind::Dict: {
      if (!v.is_namespace() && v.is_callable()) {
        out += "<LoopContext>";
        break;
      }
      if (v.is_namespace()) out += "<Namespace ";
      out += "{";
      bool first = true;
      for (auto& [k, item] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k);
        out += ": ";
        repr_into(item, out, painter);
      }
      out += "}";
      if (v.is_namespace()) out += ">";
      break;
    }
    case Kind::Func:
      out += "<function " + (v.func_ptr() ? v.func_ptr()->name : std::string("?")) + ">";
      break;
  }
  if (painter) painter->close(range, out.size());
}

}  // namespace

std::string Value::repr() const {
  std::string out;
  repr_into(*this, out, nullptr);
  return out;
}

Value tracked_str(const Value& v) {
  if (v.is_string()) return v;
  if (v.is_undefined()) return Value(std::string());
  Painter painter;
  std::string out;
  repr_into(v, out, &painter);
  Runs runs = painter.finish(out.size());
  return Value::tagged_string(std::move(out), std::move(runs));
}

void push_run(Runs& runs, size_t begin, size_t end, int32_t part) {
  if (begin >= end || part == kNoPart) return;
  if (!runs.empty() && runs.back().end == begin && runs.back().part == part) {
    runs.back().end = end;
    return;
  }
  runs.push_back({begin, end, part});
}

Value Value::tagged_string(std::string s, Runs runs) {
  const size_t n = s.size();
  Value v(std::move(s));
  if (runs.empty() || n == 0) return v;
  if (runs.size() == 1 && runs[0].begin == 0 && runs[0].end == n) {
    v.part_ = runs[0].part;
    return v;
  }
  v.runs_ = std::make_shared<const Runs>(std::move(runs));
  return v;
}

void Value::append_runs(size_t offset, Runs& out) const {
  if (part_ != kNoPart) {
    push_run(out, offset, offset + s_->size(), part_);
  } else if (runs_) {
    for (const Run& r : *runs_) push_run(out, offset + r.begin, offset + r.end, r.part);
  }
}

// ---------------------------------------------------------------------------
// comparisons

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.as_string() == b.as_string();
    case Kind::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.is_namespace() || b.is_namespace()) return a.dict_ptr() == b.dict_ptr();
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Kind::Func: return a.func_ptr() == b.func_ptr();
    default: return false;
  }
}

int values_compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined()) {
    fail(a.is_undefined() ? a.undefined_message() : b.undefined_message());
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());  // UTF-8 byte order == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// ---------------------------------------------------------------------------
// conversions

static Value from_json_untagged(const nlohmann::ordered_json& j, int32_t part) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, part));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->set(it.key(), from_json(it.value(), part));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

Value from_json(const nlohmann::ordered_json& j, int32_t part) {
  Value v = from_json_untagged(j, part);
  v.set_part(part);
  return v;
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = false;
  size_t p = 0;
  if (sci[p] == '-') { neg = true; ++p; }
  std::string digits;
  while (p < sci.size() && sci[p] != 'e') {
    if (sci[p] != '.') digits += sci[p];
    ++p;
  }
  int exp = 0;
  if (p < sci.size()) exp = std::atoi(sci.c_str() + p + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out += digits;
        out.append(exp + 1 - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, exp + 1);
        out += ".";
        out += digits.substr(exp + 1);
      }
    } else {
      out += "0.";
      out.append(-exp - 1, '0');
      out += digits;
    }
  } else {
    out += digits[0];
    if (digits.size() > 1) {
      out += ".";
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

static bool py_isprintable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad) return false;
  if (c >= 0x2000 && c <= 0x200f) return false;
  if (c >= 0x2028 && c <= 0x202f) return false;
  if (c >= 0x205f && c <= 0x206f) return false;
  if (c == 0x3000 || c == 0xfeff || c == 0x1680) return false;
  if (c >= 0xd800 && c <= 0xdfff) return false;
  if (c >= 0xe000 && c <= 0xf8ff) return false;
  if (c >= 0xfff9 && c <= 0xfffb) return false;
  return true;
}

std::string py_str_repr(const std::string& s) {
  char quote = '\'';
  if (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) quote = '"';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!py_isprintable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

static void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

namespace {
struct JsonWriter {
  const std::string* indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  Painter* painter;
  std::string out;
  int depth = 0;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *indent;
  }

  void write(const Value& v) {
    if (++depth > 512) fail("maximum recursion depth exceeded while encoding a JSON object");
    size_t range = painter ? painter->open(v, out.size()) : Painter::kNone;
    switch (v.kind()) {
      case Kind::None: out += "null"; break;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; break;
      case Kind::Int: out += std::to_string(v.as_int()); break;
      case Kind::Float: {
        double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
        else out += py_float_repr(d);
        break;
      }
      case Kind::String: json_string(out, v.as_string()); break;
      case Kind::List: {
        const auto& l = v.as_list();
        if (l.empty()) {
          out += "[]";
          break;
        }
        out += '[';
        for (size_t i = 0; i < l.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(depth);
          write(l[i]);
        }
        if (indent) newline(depth - 1);
        out += ']';
        break;
      }
      case Kind::Dict: {
        if (v.is_namespace() || v.is_callable())
          fail("Object of type " + v.type_name() + " is not JSON serializable");
        std::vector<const std::pair<std::string, Value>*> items;
        for (auto& kv : v.as_dict().items) items.push_back(&kv);
        if (sort_keys)
          std::stable_sort(items.begin(), items.end(),
                           [](auto* a, auto* b) { return a->first < b->first; });
        if (items.empty()) {
          out += "{}";
          break;
        }
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent) newline(depth);
          json_string(out, items[i]->first);
          out += key_sep;
          write(items[i]->second);
        }
        if (indent) newline(depth - 1);
        out += '}';
        break;
      }
      default: fail("Object of type " + v.type_name() + " is not JSON serializable");
    }
    if (painter) painter->close(range, out.size());
    --depth;
  }
};
}  // namespace

std::string to_json(const Value& v, const std::string* indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys, Runs* runs) {
  Painter painter;
  JsonWriter w{indent, item_sep, key_sep, sort_keys, runs ? &painter : nullptr, {}};
  w.write(v);
  if (runs) *runs = painter.finish(w.out.size());
  return std::move(w.out);
}

// ---------------------------------------------------------------------------
// UTF-8

void utf8_append(std::string& out, char32_t cp) {
  if (cp >= 0xdc80 && cp <= 0xdcff) {  // surrogate-escaped invalid byte
    out += static_cast<char>(cp - 0xdc00);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Decodes one code point at s[i]; invalid bytes map to U+DC80+byte.
static char32_t decode_one(std::string_view s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int n = 0;
  char32_t cp = 0;
  if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; }
  else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; }
  else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; }
  else { ++i; return 0xdc00 + c; }
  for (int k = 1; k <= n; ++k) {
    if (i + k >= s.size()) { ++i; return 0xdc00 + c; }
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) { ++i; return 0xdc00 + c; }
    cp = (cp << 6) | (cc & 0x3f);
  }
  static const char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { ++i; return 0xdc00 + c; }
  i += n + 1;
  return cp;
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out += decode_one(s, i);
  return out;
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0, i = 0;
  while (i < s.size()) {
    decode_one(s, i);
    ++n;
  }
  return n;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

bool py_isspace(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

// Simple case mappings for the common alphabets (ASCII, Latin-1, Latin
// Extended-A, Greek, Cyrillic, Armenian, Latin Extended Additional, fullwidth).
static bool even_odd_pair_range(char32_t c) {
  return (c >= 0x100 && c <= 0x137 && c != 0x130 && c != 0x131) || (c >= 0x14a && c <= 0x177) ||
         (c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf) || (c >= 0x4d0 && c <= 0x52f) ||
         (c >= 0x1e00 && c <= 0x1e95) || (c >= 0x1ea0 && c <= 0x1eff);
}
static bool odd_even_pair_range(char32_t c) {
  return (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e) || (c >= 0x4c1 && c <= 0x4ce);
}

char32_t py_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c == 0x131) return 'I';
  if (even_odd_pair_range(c)) return (c & 1) ? c - 1 : c;
  if (odd_even_pair_range(c)) return (c & 1) ? c : c - 1;
  if (c == 0x17f) return 'S';
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

char32_t py_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if (c == 0x130) return 'i';
  if (even_odd_pair_range(c)) return (c & 1) ? c : c + 1;
  if (odd_even_pair_range(c)) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

bool py_isdigit(char32_t c) { return (c >= '0' && c <= '9') || (c >= 0xff10 && c <= 0xff19); }

bool py_isalpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (py_upper(c) != c || py_lower(c) != c) return true;
  if (c == 0xaa || c == 0xba || c == 0xdf) return true;
  if (c < 0x100) return false;
  if (py_isspace(c)) return false;
  if (c >= 0x2000 && c <= 0x2bff) return false;  // punctuation, symbols, arrows...
  if (c >= 0x3000 && c <= 0x303f) return false;  // CJK punctuation
  if (c >= 0xff00 && c <= 0xff20) return false;
  if (c >= 0xd800 && c <= 0xf8ff) return false;
  if (c >= 0x1f000) return false;  // emoji etc.
  return true;
}

static std::string map_chars(std::string_view s, char32_t (*f)(char32_t)) {
  if (is_ascii(s)) {
    std::string out(s);
    for (auto& ch : out) ch = static_cast<char>(f(static_cast<unsigned char>(ch)));
    return out;
  }
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = f(c);
  return utf8_encode(u);
}

std::string str_upper(std::string_view s) {
  if (is_ascii(s) || s.find("\xc3\x9f") == std::string_view::npos) return map_chars(s, py_upper);
  std::string out;
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xdf) out += "SS";  // German sharp s upper-cases to "SS"
    else utf8_append(out, py_upper(c));
  }
  return out;
}
std::string str_lower(std::string_view s) { return map_chars(s, py_lower); }

std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set;
  if (chars) set = utf8_decode(*chars);
  auto strip_me = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_me(u[b])) ++b;
  if (right)
    while (e > b && strip_me(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> str_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = utf8_decode(s);
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && py_isspace(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && py_isspace(u[e - 1])) --e;
      out.push_back(utf8_encode(std::u32string_view(u).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < n && !py_isspace(u[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> str_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return str_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::u32string u = utf8_decode(s);
  size_t e = u.size();
  while (true) {
    while (e > 0 && py_isspace(u[e - 1])) --e;
    if (e == 0) break;
    if (static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t b = 0;
      while (b < e && py_isspace(u[b])) ++b;
      out.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
      break;
    }
    size_t b = e;
    while (b > 0 && !py_isspace(u[b - 1])) --b;
    out.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string str_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      utf8_append(out, c);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(from, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(to);
    pos = f + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::vector<std::string> str_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::u32string u = utf8_decode(s);
  size_t i = 0, start = 0, n = u.size();
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (i < n) {
    if (is_break(u[i])) {
      size_t eol = i + 1;
      if (u[i] == '\r' && i + 1 < n && u[i + 1] == '\n') eol = i + 2;
      out.push_back(utf8_encode(std::u32string_view(u).substr(start, (keepends ? eol : i) - start)));
      start = i = eol;
    } else {
      ++i;
    }
  }
  if (start < n) out.push_back(utf8_encode(std::u32string_view(u).substr(start)));
  return out;
}

}  // namespace pc::jinja
