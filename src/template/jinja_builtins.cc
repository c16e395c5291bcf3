// Built-in filters, tests, global functions and str/dict/list methods, with
// the semantics of Jinja2 3.1 (ImmutableSandboxedEnvironment) and of the
// Python methods they wrap.
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <ctime>

#include "template/jinja_eval.h"

namespace pc::jinja {

namespace {

using FilterFn = Value (*)(Interp&, const Value&, CallArgs&);
using TestFn = bool (*)(Interp&, const Value&, CallArgs&);

// ---- argument helpers ----
const Value* opt(const CallArgs& a, size_t i, const char* name) {
  const Value* v = a.get(i, name);
  return v && !v->is_undefined() ? v : nullptr;
}
bool arg_bool(const CallArgs& a, size_t i, const char* name, bool def) {
  const Value* v = opt(a, i, name);
  return v ? v->truthy() : def;
}
int64_t arg_int(const CallArgs& a, size_t i, const char* name, int64_t def) {
  const Value* v = opt(a, i, name);
  if (!v || v->is_none()) return def;
  if (v->is_int() || v->is_bool()) return v->as_int();
  if (v->is_float()) return static_cast<int64_t>(v->as_float());
  fail(std::string("'") + name + "' must be an integer, not " + v->type_name());
}
std::string arg_str(const CallArgs& a, size_t i, const char* name, const std::string& def) {
  const Value* v = opt(a, i, name);
  return v ? v->str() : def;
}
void require_arg(const Value* v, const char* name) {
  if (!v) fail(std::string("missing required argument '") + name + "'");
}

[[noreturn]] void fail_undefined(const Value& v) { fail(v.undefined_message()); }

std::string ascii_escape_json(const std::string& s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      char buf[16];
      auto put = [&](unsigned u) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", u);
        out += buf;
      };
      if (c >= 0x10000) {
        unsigned v = static_cast<unsigned>(c) - 0x10000;
        put(0xd800 + (v >> 10));
        put(0xdc00 + (v & 0x3ff));
      } else {
        put(static_cast<unsigned>(c));
      }
    }
  }
  return out;
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::String: return utf8_length(v.as_string());
    case Kind::List: return v.as_list().size();
    case Kind::Dict:
      if (!v.is_namespace() && !v.is_callable()) return v.as_dict().size();
      break;
    case Kind::Undefined: return 0;
    default: break;
  }
  fail("object of type '" + v.type_name() + "' has no len()");
}

// Jinja's make_attrgetter: "a.b.0" -> getitem chain.
Value get_attribute_path(Interp& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return in.getitem(item, attribute);
  Value cur = item;
  const std::string& path = attribute.as_string();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18) cur = in.getitem(cur, Value(static_cast<int64_t>(std::stoll(part))));
    else cur = in.getitem(cur, Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value(str_lower(v.as_string())) : v; }

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool is_cased(char32_t c) { return py_upper(c) != c || py_lower(c) != c; }

// Python str.title.
std::string py_title(const std::string& s) {
  std::u32string u = utf8_decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    if (is_cased(c)) {
      c = prev_cased ? py_lower(c) : py_upper(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return utf8_encode(u);
}

std::string py_capitalize(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? py_upper(u[i]) : py_lower(u[i]);
  return utf8_encode(u);
}

// Python int(str, base).
bool parse_py_int(const std::string& text, int base, int64_t& out) {
  std::string s = str_strip(text, nullptr, true, true);
  if (s.empty()) return false;
  size_t i = 0;
  bool neg = false;
  if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    char p = static_cast<char>(s[i + 1] | 0x20);
    int pb = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= s.size()) return false;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return false;
      prev_digit = false;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    else return false;
    if (d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
    prev_digit = true;
  }
  out = neg ? -v : v;
  return true;
}

bool parse_py_float(const std::string& text, double& out) {
  std::string s = str_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return false;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return false;
  std::string low = str_lower(clean);
  std::string body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    out = low[0] == '-' ? -v : v;
    return true;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos || body.find('x') != std::string::npos)
    return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end && *end == '\0';
}

double py_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 22) return x;
  if (ndigits < -22) return 0.0 * x;
  double p = std::pow(10.0, static_cast<double>(std::llabs(ndigits)));
  int old = std::fegetround();
  std::fesetround(FE_TONEAREST);
  double r = ndigits >= 0 ? std::nearbyint(x * p) / p : std::nearbyint(x / p) * p;
  std::fesetround(old);
  if (!std::isfinite(r)) return x;
  return r;
}

std::string pad_center(const std::string& s, int64_t width, const std::string& fill = " ") {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  width = std::min<int64_t>(width, 1 << 20);
  int64_t total = width - len;
  // CPython: left = total/2 + (total & width & 1)
  int64_t left = total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// ---------------------------------------------------------------------------
// filters

Value f_abs(Interp&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    int64_t i = v.as_int();
    if (i == INT64_MIN) fail("integer overflow");
    return Value(i < 0 ? -i : i);
  }
  fail("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_attr(Interp& in, const Value& v, CallArgs& a) {
  const Value* name = a.get(0, "name");
  require_arg(name, "name");
  return in.getattr(v, name->str());
}

Value f_batch(Interp& in, const Value& v, CallArgs& a) {
  int64_t n = arg_int(a, 0, "linecount", 0);
  if (n <= 0) fail("batch size must be positive");
  const Value* fill = opt(a, 1, "fill_with");
  ValueList out, cur;
  for (auto& item : in.iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs&) { return Value(py_capitalize(v.str())); }

Value f_center(Interp&, const Value& v, CallArgs& a) { return Value(pad_center(v.str(), arg_int(a, 0, "width", 80))); }

Value f_default(Interp&, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value("");
  return v;
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  if (!v.is_dict() || v.is_namespace()) fail("dictsort filter requires a mapping");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::string by = arg_str(a, 1, "by", "key");
  bool rev = arg_bool(a, 2, "reverse", false);
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  ValueList items;
  for (const auto& [k, val] : v.as_dict().items) items.push_back(Value::tuple({Value(k), val}));
  size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = x.as_list()[pos], ky = y.as_list()[pos];
    if (!cs) kx = ignore_case(kx), ky = ignore_case(ky);
    return rev ? values_compare(ky, kx) < 0 : values_compare(kx, ky) < 0;
  });
  in.tick(items.size());
  return Value::list(std::move(items));
}

Value f_escape(Interp&, const Value& v, CallArgs&) { return Value(html_escape(v.str())); }

Value f_first(Interp& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    if (v.as_string().empty()) return Value::undefined("No first item, sequence was empty.");
    return in.getitem(v, Value(0));
  }
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interp& in, const Value& v, CallArgs&) {
  if (v.is_undefined()) fail_undefined(v);
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default");
  Value def = d ? *d : Value(0.0);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    double x;
    if (parse_py_float(v.as_string(), x)) return Value(x);
  }
  return def;
}

Value f_format(Interp& in, const Value& v, CallArgs& a) {
  Value args;
  if (!a.kw.empty()) {
    auto d = std::make_shared<Dict>();
    for (auto& [k, val] : a.kw) d->set(k, val);
    args = Value::dict(d);
  } else {
    args = Value::tuple(a.pos);
  }
  return in.binop("%", Value(v.str()), args);
}

Value f_indent(Interp&, const Value& v, CallArgs& a) {
  const Value* w = opt(a, 0, "width");
  std::string ind = w && w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                                            w ? w->as_int() : 4, 0, 1000)),
                                                                        ' ');
  bool first = arg_bool(a, 1, "first", false);
  bool blank = arg_bool(a, 2, "blank", false);
  std::string s = v.str() + "\n";
  std::vector<std::string> lines = str_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
    }
  }
  if (first) rv = ind + rv;
  return Value(std::move(rv));
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  const Value* d = a.get(0, "default");
  Value def = d ? *d : Value(0);
  int64_t base = arg_int(a, 1, "base", 10);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    double x = v.as_float();
    if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) return def;
    return Value(static_cast<int64_t>(x));
  }
  if (v.is_string()) {
    int64_t r;
    if ((base == 0 || (base >= 2 && base <= 36)) && parse_py_int(v.as_string(), static_cast<int>(base), r))
      return Value(r);
    double x;
    if (parse_py_float(v.as_string(), x) && std::isfinite(x) && std::fabs(x) < 9.2e18)
      return Value(static_cast<int64_t>(x));
  }
  return def;
}

Value f_items(Interp&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict() || v.is_namespace()) fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::tuple({Value(k), val}));
  return Value::list(std::move(out));
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  std::string sep = arg_str(a, 0, "d", "");
  const Value* attr = opt(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (auto& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += attr ? get_attribute_path(in, item, *attr).str() : item.str();
    in.check_string(out.size());
  }
  return Value(std::move(out));
}

Value f_length(Interp&, const Value& v, CallArgs&) { return Value(static_cast<int64_t>(py_len(v))); }

Value f_list(Interp& in, const Value& v, CallArgs&) { return Value::list(in.iterate(v)); }

Value f_lower(Interp&, const Value& v, CallArgs&) { return Value(str_lower(v.str())); }
Value f_upper(Interp&, const Value& v, CallArgs&) { return Value(str_upper(v.str())); }

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  ValueList out;
  // Jinja2 maps only a truthy value: none, undefined, "" and 0 give an empty sequence.
  if (!v.truthy()) return Value::list({});
  ValueList items = in.iterate(v);
  if (a.pos.empty()) {
    const Value* attr = a.kwarg("attribute");
    if (!attr) fail("map requires a filter name or an attribute");
    const Value* def = a.kwarg("default");
    for (auto& item : items) {
      Value r = get_attribute_path(in, item, *attr);
      if (r.is_undefined() && def) r = *def;
      out.push_back(std::move(r));
    }
    return Value::list(std::move(out));
  }
  std::string name = a.pos[0].str();
  for (auto& item : items) {
    CallArgs fa;
    fa.pos.assign(a.pos.begin() + 1, a.pos.end());
    fa.kw = a.kw;
    out.push_back(in.apply_filter(name, item, fa));
  }
  return Value::list(std::move(out));
}

Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = opt(a, 1, "attribute");
  ValueList items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    Value k = attr ? get_attribute_path(in, x, *attr) : x;
    return cs ? k : ignore_case(k);
  };
  size_t best = 0;
  Value bk = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    int c = values_compare(k, bk);
    if (want_max ? c > 0 : c < 0) best = i, bk = k;
  }
  return items[best];
}
Value f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

Value f_pprint(Interp&, const Value& v, CallArgs&) { return Value(v.repr()); }

Value select_impl(Interp& in, const Value& v, CallArgs& a, bool attr_mode, bool keep) {
  ValueList out;
  // Jinja2 filters only a truthy value (`if value:`): none, undefined, "" and 0 give an
  // empty sequence without looking at the arguments (`tools | selectattr(...)` with no
  // tools).
  if (!v.truthy()) return Value::list(std::move(out));
  size_t off = 0;
  const Value* attr = nullptr;
  if (attr_mode) {
    if (a.pos.empty()) fail("Missing parameter for attribute name");
    attr = &a.pos[0];
    off = 1;
  }
  std::string test;
  bool has_test = a.pos.size() > off;
  if (has_test) test = a.pos[off].str();
  for (auto& item : in.iterate(v)) {
    Value x = attr ? get_attribute_path(in, item, *attr) : item;
    bool r;
    if (has_test) {
      CallArgs ta;
      ta.pos.assign(a.pos.begin() + static_cast<long>(off) + 1, a.pos.end());
      ta.kw = a.kw;
      r = in.apply_test(test, x, ta);
    } else {
      r = x.truthy();
    }
    if (r == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  const Value* from = a.get(0, "old");
  const Value* to = a.get(1, "new");
  require_arg(from, "old");
  require_arg(to, "new");
  int64_t count = arg_int(a, 2, "count", -1);
  std::string r = str_replace(v.str(), from->str(), to->str(), count);
  in.check_string(r.size());
  return Value(std::move(r));
}

Value f_reverse(Interp& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  ValueList items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  int64_t precision = arg_int(a, 0, "precision", 0);
  std::string method = arg_str(a, 1, "method", "common");
  if (!v.is_number()) fail("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    return Value(py_round(v.as_float(), precision));
  }
  if (method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
  double p = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * p;
  x = method == "ceil" ? std::ceil(x) : std::floor(x);
  return Value(x / p);
}

Value f_safe(Interp&, const Value& v, CallArgs&) { return v.is_string() ? v : Value(v.str()); }

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  bool rev = arg_bool(a, 0, "reverse", false);
  bool cs = arg_bool(a, 1, "case_sensitive", false);
  const Value* attr = opt(a, 2, "attribute");
  ValueList items = in.iterate(v);
  std::vector<std::string> parts;
  if (attr) {
    if (attr->is_string()) {
      std::string sep = ",";
      for (auto& p : str_split(attr->as_string(), &sep, -1)) parts.push_back(str_strip(p, nullptr, true, true));
    }
  }
  auto key = [&](const Value& x) -> Value {
    if (!attr) return cs ? x : ignore_case(x);
    if (!attr->is_string()) {
      Value k = in.getitem(x, *attr);
      return cs ? k : ignore_case(k);
    }
    if (parts.size() == 1) {
      Value k = get_attribute_path(in, x, Value(parts[0]));
      return cs ? k : ignore_case(k);
    }
    ValueList ks;
    for (auto& p : parts) {
      Value k = get_attribute_path(in, x, Value(p));
      ks.push_back(cs ? k : ignore_case(k));
    }
    return Value::list(std::move(ks));
  };
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
  in.tick(items.size());
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? values_compare(y.first, x.first) < 0 : values_compare(x.first, y.first) < 0;
  });
  ValueList out;
  for (auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Interp&, const Value& v, CallArgs&) { return v.is_string() ? v : Value(v.str()); }

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  const Value* attr = opt(a, 0, "attribute");
  const Value* start = opt(a, 1, "start");
  Value total = start ? *start : Value(0);
  for (auto& item : in.iterate(v)) {
    Value x = attr ? get_attribute_path(in, item, *attr) : item;
    if (total.is_number() && x.is_number()) {
      if (total.is_float() || x.is_float()) total = Value(total.as_float() + x.as_float());
      else {
        int64_t r;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) fail("integer overflow");
        total = Value(r);
      }
    } else if (total.is_list() && x.is_list()) {
      ValueList l = total.as_list();
      l.insert(l.end(), x.as_list().begin(), x.as_list().end());
      in.check_list(l.size());
      total = Value::list(std::move(l));
    } else {
      fail("unsupported operand type(s) for +: '" + total.type_name() + "' and '" + x.type_name() + "'");
    }
  }
  return total;
}

Value f_title(Interp&, const Value& v, CallArgs&) {
  std::u32string u = utf8_decode(v.str());
  bool word_start = true;
  for (auto& c : u) {
    bool delim = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    if (delim) {
      word_start = true;
    } else {
      c = word_start ? py_upper(c) : py_lower(c);
      word_start = false;
    }
  }
  return Value(utf8_encode(u));
}

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  bool ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  const Value* indent = opt(a, 1, "indent");
  const Value* separators = opt(a, 2, "separators");
  bool sort_keys = arg_bool(a, 3, "sort_keys", false);
  std::string ind;
  const std::string* ind_ptr = nullptr;
  if (indent && !indent->is_none()) {
    if (indent->is_string()) ind = indent->as_string();
    else if (indent->is_int() || indent->is_bool()) ind = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 1000)), ' ');
    else fail("indent must be an integer or a string");
    ind_ptr = &ind;
  }
  std::string item_sep = ind_ptr ? "," : ", ";
  std::string key_sep = ": ";
  if (separators && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2) fail("separators must be a pair of strings");
    item_sep = separators->as_list()[0].str();
    key_sep = separators->as_list()[1].str();
  }
  if (v.is_undefined()) fail("Object of type Undefined is not JSON serializable");
  Runs runs;
  const bool track = in.tracking() && !ensure_ascii;  // ensure_ascii moves bytes: inherit() tags it
  std::string out = to_json(v, ind_ptr, item_sep, key_sep, sort_keys, track ? &runs : nullptr);
  in.check_string(out.size());
  if (ensure_ascii) out = ascii_escape_json(out);
  return Value::tagged_string(std::move(out), std::move(runs));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  const Value* chars = opt(a, 0, "chars");
  if (chars && !chars->is_none()) {
    std::string c = chars->str();
    return Value(str_strip(v.str(), &c, true, true));
  }
  return Value(str_strip(v.str(), nullptr, true, true));
}

Value f_truncate(Interp&, const Value& v, CallArgs& a) {
  std::string s = v.str();
  int64_t length = arg_int(a, 0, "length", 255);
  bool killwords = arg_bool(a, 1, "killwords", false);
  std::string end = arg_str(a, 2, "end", "...");
  int64_t leeway = arg_int(a, 3, "leeway", 5);
  std::u32string u = utf8_decode(s);
  if (length < static_cast<int64_t>(utf8_length(end)))
    fail("expected length >= " + std::to_string(utf8_length(end)) + ", got " + std::to_string(length));
  if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
  if (static_cast<int64_t>(u.size()) <= length + leeway) return Value(s);
  int64_t keep = std::max<int64_t>(0, length - static_cast<int64_t>(utf8_length(end)));
  std::u32string head = u.substr(0, static_cast<size_t>(std::min<int64_t>(keep, static_cast<int64_t>(u.size()))));
  if (!killwords) {
    size_t sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value(utf8_encode(head) + end);
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = opt(a, 1, "attribute");
  ValueList out, seen;
  for (auto& item : in.iterate(v)) {
    Value k = attr ? get_attribute_path(in, item, *attr) : item;
    if (!cs) k = ignore_case(k);
    bool dup = false;
    in.tick(seen.size() / 64 + 1);
    for (auto& s : seen)
      if (values_equal(s, k)) {
        dup = true;
        break;
      }
    if (!dup) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(v.str())) {
    bool w = py_isalpha(c) || py_isdigit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"pprint", f_pprint},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

// ---------------------------------------------------------------------------
// tests

bool t_defined(Interp&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interp&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_false(Interp&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_true(Interp&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_integer(Interp&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interp&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interp&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interp&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interp&, const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace() && !v.is_callable(); }
bool t_iterable(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_undefined() || (v.is_dict() && !v.is_namespace());
}
bool t_sequence(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_undefined() || (v.is_dict() && !v.is_namespace() && !v.is_callable());
}
bool t_callable(Interp&, const Value& v, CallArgs&) { return v.is_callable(); }
const Value& test_arg(const CallArgs& a) {
  const Value* o = a.get(0, "other");
  if (!o) fail("test requires an argument");
  return *o;
}
bool t_eq(Interp&, const Value& v, CallArgs& a) { return values_equal(v, test_arg(a)); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return !values_equal(v, test_arg(a)); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return values_compare(v, test_arg(a)) < 0; }
bool t_le(Interp&, const Value& v, CallArgs& a) { return values_compare(v, test_arg(a)) <= 0; }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return values_compare(v, test_arg(a)) > 0; }
bool t_ge(Interp&, const Value& v, CallArgs& a) { return values_compare(v, test_arg(a)) >= 0; }
bool t_in(Interp& in, const Value& v, CallArgs& a) {
  const Value* seq = a.get(0, "seq");
  if (!seq) fail("test 'in' requires an argument");
  if (seq->is_string()) {
    if (!v.is_string()) fail("'in <string>' requires string as left operand, not " + v.type_name());
    return seq->as_string().find(v.as_string()) != std::string::npos;
  }
  if (seq->is_dict()) return v.is_string() && !seq->is_namespace() && seq->as_dict().find(v.as_string());
  for (auto& x : in.iterate(*seq))
    if (values_equal(x, v)) return true;
  return false;
}
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& o = test_arg(a);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::None:
    case Kind::Undefined: return true;
    case Kind::Bool: return v.as_bool() == o.as_bool();
    case Kind::Int: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::List: return v.list_ptr() == o.list_ptr();
    case Kind::Dict: return v.dict_ptr() == o.dict_ptr();
    case Kind::Func: return v.func_ptr() == o.func_ptr();
    case Kind::String: return v.as_string() == o.as_string();  // CPython shares equal constants
    default: return false;
  }
}
bool t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  const Value& n = test_arg(a);
  if (!v.is_number() || !n.is_number()) fail("divisibleby requires numbers");
  if (v.is_float() || n.is_float()) {
    if (n.as_float() == 0) fail("float modulo");
    return std::fmod(v.as_float(), n.as_float()) == 0;
  }
  if (n.as_int() == 0) fail("integer division or modulo by zero");
  if (n.as_int() == -1) return true;
  return v.as_int() % n.as_int() == 0;
}
bool t_even(Interp&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) fail("even test requires an integer");
  return v.as_int() % 2 == 0;
}
bool t_odd(Interp&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool()) fail("odd test requires an integer");
  return v.as_int() % 2 != 0;
}
bool cased_check(const Value& v, bool want_lower) {
  if (!v.is_string()) return false;
  bool any = false;
  for (char32_t c : utf8_decode(v.as_string())) {
    if (!is_cased(c)) continue;
    any = true;
    bool lower = py_lower(c) == c;
    if (lower != want_lower) return false;
  }
  return any;
}
bool t_lower(Interp&, const Value& v, CallArgs&) { return cased_check(v, true); }
bool t_upper(Interp&, const Value& v, CallArgs&) { return cased_check(v, false); }
bool t_escaped(Interp&, const Value&, CallArgs&) { return false; }
bool t_filter(Interp& in, const Value& v, CallArgs&) { return v.is_string() && in.has_filter(v.as_string()); }
bool t_test(Interp& in, const Value& v, CallArgs&) { return v.is_string() && in.has_test(v.as_string()); }

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
      {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
      {"even", t_even},       {"false", t_false},       {"filter", t_filter},     {"float", t_float},
      {"ge", t_ge},           {">=", t_ge},             {"gt", t_gt},             {">", t_gt},
      {"greaterthan", t_gt},  {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
      {"le", t_le},           {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
      {"<", t_lt},            {"lessthan", t_lt},       {"mapping", t_mapping},   {"ne", t_ne},
      {"!=", t_ne},           {"none", t_none},         {"number", t_number},     {"odd", t_odd},
      {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
      {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
  };
  return table;
}

// ---------------------------------------------------------------------------
// str.format (positional / keyword fields, simple format specs)

std::string apply_format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return v.str();
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  std::u32string u = utf8_decode(spec);
  if (u.size() >= 2 && (u[1] == '<' || u[1] == '>' || u[1] == '^')) {
    fill.clear();
    utf8_append(fill, u[0]);
    align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && (u[0] == '<' || u[0] == '>' || u[0] == '^')) {
    align = static_cast<char>(u[0]);
    i = 1;
  }
  std::string rest = utf8_encode(u.substr(i));
  size_t j = 0;
  std::string width;
  while (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j]))) width += rest[j++];
  std::string prec;
  if (j < rest.size() && rest[j] == '.') {
    ++j;
    while (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j]))) prec += rest[j++];
  }
  char type = j < rest.size() ? rest[j] : 0;
  std::string body;
  char buf[512];
  if (type == 'f' || type == 'F' || type == 'e' || type == 'g' || (type == 0 && !prec.empty() && v.is_number())) {
    if (!v.is_number()) fail("Unknown format code for object of type '" + v.type_name() + "'");
    std::string f = "%." + (prec.empty() ? std::string("6") : prec.substr(0, 3)) + (type ? type : 'g');
    std::snprintf(buf, sizeof(buf), f.c_str(), v.as_float());
    body = buf;
  } else if (type == 'd') {
    if (!v.is_int() && !v.is_bool()) fail("Unknown format code 'd' for object of type '" + v.type_name() + "'");
    body = std::to_string(v.as_int());
  } else {
    body = v.str();
    if (!prec.empty()) {
      std::u32string b = utf8_decode(body);
      size_t p = std::min<size_t>(std::stoul(prec.substr(0, 6)), b.size());
      body = utf8_encode(b.substr(0, p));
    }
  }
  if (!width.empty()) {
    int64_t w = std::min<int64_t>(std::stoll(width.substr(0, 6)), 100000);
    int64_t len = static_cast<int64_t>(utf8_length(body));
    if (len < w) {
      if (!align) align = v.is_number() ? '>' : '<';
      int64_t pad = w - len;
      int64_t left = align == '<' ? 0 : (align == '>' ? pad : pad / 2);
      std::string out;
      for (int64_t k = 0; k < left; ++k) out += fill;
      out += body;
      for (int64_t k = 0; k < pad - left; ++k) out += fill;
      body = out;
    }
  }
  return body;
}

std::string str_format(Interp& in, const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out += '{';
        ++i;
        continue;
      }
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) fail("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      std::string spec;
      size_t colon = field.find(':');
      if (colon != std::string::npos) {
        spec = field.substr(colon + 1);
        field = field.substr(0, colon);
      }
      size_t bang = field.find('!');
      std::string conv;
      if (bang != std::string::npos) {
        conv = field.substr(bang + 1);
        field = field.substr(0, bang);
      }
      // split off attribute / index access
      size_t acc = field.find_first_of(".[");
      std::string head = field.substr(0, acc);
      std::string tail = acc == std::string::npos ? "" : field.substr(acc);
      Value v;
      if (head.empty()) {
        if (auto_idx >= a.pos.size()) fail("Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
        v = a.pos[auto_idx++];
      } else if (std::all_of(head.begin(), head.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        size_t idx = head.size() < 9 ? std::stoul(head) : SIZE_MAX;
        if (idx >= a.pos.size()) fail("Replacement index " + head + " out of range for positional args tuple");
        v = a.pos[idx];
      } else {
        const Value* kv = a.kwarg(head);
        if (!kv) fail("KeyError: '" + head + "'");
        v = *kv;
      }
      size_t p = 0;
      while (p < tail.size()) {
        if (tail[p] == '.') {
          size_t e = tail.find_first_of(".[", p + 1);
          std::string name = tail.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1);
          v = in.getattr(v, name);
          p = e == std::string::npos ? tail.size() : e;
        } else {
          size_t e = tail.find(']', p);
          if (e == std::string::npos) fail("Missing ']' in format string");
          std::string key = tail.substr(p + 1, e - p - 1);
          bool digits = !key.empty() && key.size() < 18 &&
                        std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
          v = in.getitem(v, digits ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
          p = e + 1;
        }
      }
      if (conv == "r") v = Value(v.repr());
      else if (conv == "s") v = Value(v.str());
      out += apply_format_spec(v, spec);
      in.check_string(out.size());
      i = close;
    } else if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else fail("Single '}' encountered in format string");
      out += '}';
    } else {
      out += c;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// methods

using MethodFn = Value (*)(Interp&, const Value& self, CallArgs&);

Value m_strip_impl(const Value& self, CallArgs& a, bool l, bool r) {
  const Value* chars = opt(a, 0, "chars");
  if (chars && !chars->is_none()) {
    if (!chars->is_string()) fail("strip arg must be None or str");
    return Value(str_strip(self.as_string(), &chars->as_string(), l, r));
  }
  return Value(str_strip(self.as_string(), nullptr, l, r));
}
Value m_strip(Interp&, const Value& s, CallArgs& a) { return m_strip_impl(s, a, true, true); }
Value m_lstrip(Interp&, const Value& s, CallArgs& a) { return m_strip_impl(s, a, true, false); }
Value m_rstrip(Interp&, const Value& s, CallArgs& a) { return m_strip_impl(s, a, false, true); }

Value split_impl(const Value& self, CallArgs& a, bool right) {
  const Value* sep = opt(a, 0, "sep");
  int64_t maxsplit = arg_int(a, 1, "maxsplit", -1);
  const std::string* sp = nullptr;
  if (sep && !sep->is_none()) {
    if (!sep->is_string()) fail("must be str or None, not " + sep->type_name());
    sp = &sep->as_string();
  }
  auto parts = right ? str_rsplit(self.as_string(), sp, maxsplit) : str_split(self.as_string(), sp, maxsplit);
  ValueList out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}
Value m_split(Interp&, const Value& s, CallArgs& a) { return split_impl(s, a, false); }
Value m_rsplit(Interp&, const Value& s, CallArgs& a) { return split_impl(s, a, true); }
Value m_splitlines(Interp&, const Value& s, CallArgs& a) {
  ValueList out;
  for (auto& p : str_splitlines(s.as_string(), arg_bool(a, 0, "keepends", false))) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

// Byte offset of code point index `idx` (clamped, Python-style negatives).
size_t cp_offset(const std::string& s, int64_t idx) {
  int64_t n = static_cast<int64_t>(utf8_length(s));
  if (idx < 0) idx = std::max<int64_t>(0, idx + n);
  if (idx > n) idx = n;
  if (is_ascii(s)) return static_cast<size_t>(idx);
  std::u32string u = utf8_decode(s);
  return utf8_encode(std::u32string_view(u).substr(0, static_cast<size_t>(idx))).size();
}

Value affix_impl(const Value& self, CallArgs& a, bool start) {
  const Value* p = a.get(0, "prefix");
  require_arg(p, "prefix");
  std::string s = self.as_string();
  const Value* b = opt(a, 1, "start");
  const Value* e = opt(a, 2, "end");
  if (b || e) {
    size_t bo = b && !b->is_none() ? cp_offset(s, b->as_int()) : 0;
    size_t eo = e && !e->is_none() ? cp_offset(s, e->as_int()) : s.size();
    s = eo > bo ? s.substr(bo, eo - bo) : std::string();
  }
  auto check = [&](const std::string& x) {
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (p->is_string()) return Value(check(p->as_string()));
  if (p->is_tuple()) {
    for (auto& x : p->as_list()) {
      if (!x.is_string()) fail("tuple for startswith must only contain str");
      if (check(x.as_string())) return Value(true);
    }
    return Value(false);
  }
  fail(std::string(start ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " +
       p->type_name());
}
Value m_startswith(Interp&, const Value& s, CallArgs& a) { return affix_impl(s, a, true); }
Value m_endswith(Interp&, const Value& s, CallArgs& a) { return affix_impl(s, a, false); }

Value m_replace(Interp& in, const Value& s, CallArgs& a) {
  const Value* from = a.get(0, "old");
  const Value* to = a.get(1, "new");
  require_arg(from, "old");
  require_arg(to, "new");
  if (!from->is_string() || !to->is_string()) fail("replace() argument must be str");
  int64_t count = arg_int(a, 2, "count", -1);
  std::string r = str_replace(s.as_string(), from->as_string(), to->as_string(), count);
  in.check_string(r.size());
  return Value(std::move(r));
}
Value m_upper(Interp&, const Value& s, CallArgs&) { return Value(str_upper(s.as_string())); }
Value m_lower(Interp&, const Value& s, CallArgs&) { return Value(str_lower(s.as_string())); }
Value m_title(Interp&, const Value& s, CallArgs&) { return Value(py_title(s.as_string())); }
Value m_capitalize(Interp&, const Value& s, CallArgs&) { return Value(py_capitalize(s.as_string())); }
Value m_swapcase(Interp&, const Value& s, CallArgs&) {
  std::u32string u = utf8_decode(s.as_string());
  for (auto& c : u) c = py_lower(c) != c ? py_lower(c) : py_upper(c);
  return Value(utf8_encode(u));
}

int64_t find_impl(const Value& s, CallArgs& a, bool reverse) {
  const Value* sub = a.get(0, "sub");
  require_arg(sub, "sub");
  if (!sub->is_string()) fail("must be str, not " + sub->type_name());
  const std::string& str = s.as_string();
  const Value* b = opt(a, 1, "start");
  const Value* e = opt(a, 2, "end");
  size_t bo = b && !b->is_none() ? cp_offset(str, b->as_int()) : 0;
  size_t eo = e && !e->is_none() ? cp_offset(str, e->as_int()) : str.size();
  if (eo < bo) return -1;
  std::string_view win = std::string_view(str).substr(bo, eo - bo);
  size_t f = reverse ? win.rfind(sub->as_string()) : win.find(sub->as_string());
  if (f == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(std::string_view(str).substr(0, bo + f)));
}
Value m_find(Interp&, const Value& s, CallArgs& a) { return Value(find_impl(s, a, false)); }
Value m_rfind(Interp&, const Value& s, CallArgs& a) { return Value(find_impl(s, a, true)); }
Value m_index(Interp&, const Value& s, CallArgs& a) {
  int64_t r = find_impl(s, a, false);
  if (r < 0) fail("substring not found");
  return Value(r);
}
Value m_rindex(Interp&, const Value& s, CallArgs& a) {
  int64_t r = find_impl(s, a, true);
  if (r < 0) fail("substring not found");
  return Value(r);
}
Value m_count(Interp&, const Value& s, CallArgs& a) {
  const Value* sub = a.get(0, "sub");
  require_arg(sub, "sub");
  if (!sub->is_string()) fail("must be str, not " + sub->type_name());
  const std::string& str = s.as_string();
  const std::string& x = sub->as_string();
  if (x.empty()) return Value(static_cast<int64_t>(utf8_length(str) + 1));
  int64_t n = 0;
  for (size_t p = str.find(x); p != std::string::npos; p = str.find(x, p + x.size())) ++n;
  return Value(n);
}
Value m_join(Interp& in, const Value& s, CallArgs& a) {
  const Value* it = a.get(0, "iterable");
  require_arg(it, "iterable");
  std::string out;
  bool first = true;
  for (auto& item : in.iterate(*it)) {
    if (!item.is_string()) fail("sequence item: expected str instance, " + item.type_name() + " found");
    if (!first) out += s.as_string();
    first = false;
    out += item.as_string();
    in.check_string(out.size());
  }
  return Value(std::move(out));
}
Value m_format(Interp& in, const Value& s, CallArgs& a) { return Value(str_format(in, s.as_string(), a)); }

template <bool (*Pred)(char32_t)>
Value all_chars(Interp&, const Value& s, CallArgs&) {
  std::u32string u = utf8_decode(s.as_string());
  if (u.empty()) return Value(false);
  for (char32_t c : u)
    if (!Pred(c)) return Value(false);
  return Value(true);
}
bool is_alnum_cp(char32_t c) { return py_isalpha(c) || py_isdigit(c); }
Value m_isupper(Interp&, const Value& s, CallArgs&) { return Value(cased_check(s, false)); }
Value m_islower(Interp&, const Value& s, CallArgs&) { return Value(cased_check(s, true)); }
Value m_zfill(Interp&, const Value& s, CallArgs& a) {
  int64_t w = std::min<int64_t>(arg_int(a, 0, "width", 0), 1 << 20);
  std::string str = s.as_string();
  int64_t len = static_cast<int64_t>(utf8_length(str));
  if (len >= w) return s;
  size_t sign = !str.empty() && (str[0] == '+' || str[0] == '-') ? 1 : 0;
  str.insert(sign, static_cast<size_t>(w - len), '0');
  return Value(str);
}
Value m_center(Interp&, const Value& s, CallArgs& a) {
  return Value(pad_center(s.as_string(), arg_int(a, 0, "width", 0), arg_str(a, 1, "fillchar", " ")));
}
Value just_impl(const Value& s, CallArgs& a, bool left) {
  int64_t w = std::min<int64_t>(arg_int(a, 0, "width", 0), 1 << 20);
  std::string fill = arg_str(a, 1, "fillchar", " ");
  std::string str = s.as_string();
  int64_t len = static_cast<int64_t>(utf8_length(str));
  std::string pad;
  for (int64_t i = len; i < w; ++i) pad += fill;
  return Value(left ? str + pad : pad + str);
}
Value m_ljust(Interp&, const Value& s, CallArgs& a) { return just_impl(s, a, true); }
Value m_rjust(Interp&, const Value& s, CallArgs& a) { return just_impl(s, a, false); }
Value m_removeprefix(Interp&, const Value& s, CallArgs& a) {
  std::string p = arg_str(a, 0, "prefix", "");
  const std::string& str = s.as_string();
  return str.compare(0, p.size(), p) == 0 && p.size() <= str.size() ? Value(str.substr(p.size())) : s;
}
Value m_removesuffix(Interp&, const Value& s, CallArgs& a) {
  std::string p = arg_str(a, 0, "suffix", "");
  const std::string& str = s.as_string();
  if (!p.empty() && p.size() <= str.size() && str.compare(str.size() - p.size(), p.size(), p) == 0)
    return Value(str.substr(0, str.size() - p.size()));
  return s;
}
Value partition_impl(const Value& s, CallArgs& a, bool right) {
  const Value* sep = a.get(0, "sep");
  require_arg(sep, "sep");
  if (!sep->is_string() || sep->as_string().empty()) fail("empty separator");
  const std::string& str = s.as_string();
  size_t f = right ? str.rfind(sep->as_string()) : str.find(sep->as_string());
  if (f == std::string::npos)
    return right ? Value::tuple({Value(""), Value(""), s}) : Value::tuple({s, Value(""), Value("")});
  return Value::tuple({Value(str.substr(0, f)), *sep, Value(str.substr(f + sep->as_string().size()))});
}
Value m_partition(Interp&, const Value& s, CallArgs& a) { return partition_impl(s, a, false); }
Value m_rpartition(Interp&, const Value& s, CallArgs& a) { return partition_impl(s, a, true); }

const std::unordered_map<std::string, MethodFn>& str_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"strip", m_strip},
      {"lstrip", m_lstrip},
      {"rstrip", m_rstrip},
      {"split", m_split},
      {"rsplit", m_rsplit},
      {"splitlines", m_splitlines},
      {"startswith", m_startswith},
      {"endswith", m_endswith},
      {"replace", m_replace},
      {"upper", m_upper},
      {"lower", m_lower},
      {"casefold", m_lower},
      {"title", m_title},
      {"capitalize", m_capitalize},
      {"swapcase", m_swapcase},
      {"find", m_find},
      {"rfind", m_rfind},
      {"index", m_index},
      {"rindex", m_rindex},
      {"count", m_count},
      {"join", m_join},
      {"format", m_format},
      {"isdigit", all_chars<py_isdigit>},
      {"isdecimal", all_chars<py_isdigit>},
      {"isnumeric", all_chars<py_isdigit>},
      {"isalpha", all_chars<py_isalpha>},
      {"isalnum", all_chars<is_alnum_cp>},
      {"isspace", all_chars<py_isspace>},
      {"isupper", m_isupper},
      {"islower", m_islower},
      {"zfill", m_zfill},
      {"center", m_center},
      {"ljust", m_ljust},
      {"rjust", m_rjust},
      {"removeprefix", m_removeprefix},
      {"removesuffix", m_removesuffix},
      {"partition", m_partition},
      {"rpartition", m_rpartition},
  };
  return table;
}

Value d_get(Interp&, const Value& d, CallArgs& a) {
  const Value* k = a.get(0, "key");
  require_arg(k, "key");
  const Value* def = a.get(1, "default");
  if (k->is_string())
    if (const Value* v = d.as_dict().find(k->as_string())) return *v;
  return def ? *def : Value::none();
}
Value d_items(Interp& in, const Value& d, CallArgs& a) { return f_items(in, d, a); }
Value d_keys(Interp& in, const Value& d, CallArgs&) { return Value::list(in.iterate(d)); }
Value d_values(Interp&, const Value& d, CallArgs&) {
  ValueList out;
  for (const auto& kv : d.as_dict().items) out.push_back(kv.second);
  return Value::list(std::move(out));
}
Value d_copy(Interp&, const Value& d, CallArgs&) { return Value::dict(std::make_shared<Dict>(d.as_dict())); }

const std::unordered_map<std::string, MethodFn>& dict_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"get", d_get}, {"items", d_items}, {"keys", d_keys}, {"values", d_values}, {"copy", d_copy},
  };
  return table;
}

Value l_index(Interp&, const Value& l, CallArgs& a) {
  const Value* x = a.get(0, "value");
  require_arg(x, "value");
  const auto& items = l.as_list();
  for (size_t i = 0; i < items.size(); ++i)
    if (values_equal(items[i], *x)) return Value(static_cast<int64_t>(i));
  fail(x->repr() + " is not in list");
}
Value l_count(Interp&, const Value& l, CallArgs& a) {
  const Value* x = a.get(0, "value");
  require_arg(x, "value");
  int64_t n = 0;
  for (const auto& item : l.as_list())
    if (values_equal(item, *x)) ++n;
  return Value(n);
}
Value l_copy(Interp&, const Value& l, CallArgs&) { return Value::list(l.as_list()); }

const std::unordered_map<std::string, MethodFn>& list_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"index", l_index}, {"count", l_count}, {"copy", l_copy}};
  return table;
}

bool is_mutating_method(const Value& obj, const std::string& name) {
  static const char* kList[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* kDict[] = {"pop", "popitem", "setdefault", "update", "clear"};
  if (obj.is_list() && !obj.is_tuple()) {
    for (const char* m : kList)
      if (name == m) return true;
  }
  if (obj.is_dict()) {
    for (const char* m : kDict)
      if (name == m) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// globals

Value g_range(Interp& in, CallArgs& a) {
  int64_t start = 0, stop, step = 1;
  auto num = [](const Value& v) {
    if (!v.is_int() && !v.is_bool()) fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
    return v.as_int();
  };
  if (a.pos.size() == 1) {
    stop = num(a.pos[0]);
  } else if (a.pos.size() == 2 || a.pos.size() == 3) {
    start = num(a.pos[0]);
    stop = num(a.pos[1]);
    if (a.pos.size() == 3) step = num(a.pos[2]);
  } else {
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  long double count = step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
                               : (start > stop ? (static_cast<long double>(start) - stop - step - 1) / -step : 0);
  if (count > 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  ValueList out;
  int64_t n = static_cast<int64_t>(count);
  for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
  in.tick(static_cast<uint64_t>(n / 64));
  return Value::list(std::move(out));
}

Value g_dict(Interp&, CallArgs& a) {
  auto d = std::make_shared<Dict>();
  for (const auto& p : a.pos) {
    if (p.is_dict() && !p.is_namespace()) {
      for (const auto& [k, v] : p.as_dict().items) d->set(k, v);
    } else if (p.is_list()) {
      for (const auto& pair : p.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2) fail("dictionary update sequence element has wrong length");
        d->set(pair.as_list()[0].str(), pair.as_list()[1]);
      }
    } else {
      fail("'" + p.type_name() + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : a.kw) d->set(k, v);
  return Value::dict(std::move(d));
}

Value g_namespace(Interp& in, CallArgs& a) {
  Value d = g_dict(in, a);
  return Value::namespace_(std::make_shared<Dict>(d.as_dict()));
}

Value g_raise_exception(Interp&, CallArgs& a) {
  throw RaiseError{a.pos.empty() ? std::string() : a.pos[0].str()};
}

Value g_strftime_now(Interp&, CallArgs& a) {
  // Fixed clock: 2026-01-02 03:04:05 (a Friday), like the reference renderings.
  std::string fmt = a.pos.empty() ? std::string() : a.pos[0].str();
  if (fmt.size() > 4096) fail("strftime format too long");
  std::string expanded;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      char c = fmt[i + 1];
      if (c == 'f') { expanded += "000000"; ++i; continue; }
      if (c == 'z' || c == 'Z') { ++i; continue; }
      if (c == '%') { expanded += "%%"; ++i; continue; }
      static const char* kOk = "aAbBcdHIjmMpSUwWxXyYGuVgeChnrRtTDFsklP";
      if (!std::strchr(kOk, c)) {
        expanded += "%%";
        continue;
      }
    }
    expanded += fmt[i];
  }
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 2;
  tm.tm_hour = 3;
  tm.tm_min = 4;
  tm.tm_sec = 5;
  tm.tm_wday = 5;
  tm.tm_yday = 1;
  tm.tm_isdst = 0;
  if (expanded.empty()) return Value("");
  std::string buf(expanded.size() * 16 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), expanded.c_str(), &tm);
  buf.resize(n);
  return Value(std::move(buf));
}

Value g_joiner(Interp&, CallArgs& a) {
  std::string sep = arg_str(a, 0, "sep", ", ");
  auto used = std::make_shared<bool>(false);
  auto c = std::make_shared<Callable>();
  c->name = "joiner";
  c->fn = [sep, used](Interp&, CallArgs&) -> Value {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  };
  return Value::func(std::move(c));
}

Value g_cycler(Interp&, CallArgs& a) {
  auto items = std::make_shared<ValueList>(a.pos);
  if (items->empty()) fail("at least one item has to be provided");
  auto pos = std::make_shared<size_t>(0);
  auto d = std::make_shared<Dict>();
  std::weak_ptr<Dict> wd = d;
  d->set("current", (*items)[0]);
  auto next = std::make_shared<Callable>();
  next->name = "next";
  next->fn = [items, pos, wd](Interp&, CallArgs&) -> Value {
    Value r = (*items)[*pos];
    *pos = (*pos + 1) % items->size();
    if (auto dd = wd.lock()) dd->set("current", (*items)[*pos]);
    return r;
  };
  auto reset = std::make_shared<Callable>();
  reset->name = "reset";
  reset->fn = [items, pos, wd](Interp&, CallArgs&) -> Value {
    *pos = 0;
    if (auto dd = wd.lock()) dd->set("current", (*items)[0]);
    return Value::none();
  };
  d->set("next", Value::func(next));
  d->set("reset", Value::func(reset));
  return Value::namespace_(std::move(d));
}

}  // namespace

// ---------------------------------------------------------------------------

bool Interp::has_filter(const std::string& name) const { return filters().count(name) != 0; }
bool Interp::has_test(const std::string& name) const { return tests().count(name) != 0; }

Value Interp::apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  tick();
  auto it = filters().find(name);
  if (it == filters().end()) fail("No filter named '" + name + "'.");
  Value r = it->second(*this, v, args);
  if (tracking_) inherit(r, v, &args);
  return r;
}

bool Interp::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  tick();
  auto it = tests().find(name);
  if (it == tests().end()) fail("No test named '" + name + "'.");
  return it->second(*this, v, args);
}

Value bound_method(const Value& obj, const std::string& name, bool* found) {
  *found = false;
  const std::unordered_map<std::string, MethodFn>* table = nullptr;
  if (obj.is_string()) table = &str_methods();
  else if (obj.is_dict() && !obj.is_namespace() && !obj.is_callable()) table = &dict_methods();
  else if (obj.is_list()) table = &list_methods();
  if (!table) return Value::undefined("");
  auto it = table->find(name);
  if (it == table->end()) {
    if (is_mutating_method(obj, name)) {
      *found = true;
      return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
    }
    return Value::undefined("");
  }
  *found = true;
  auto c = std::make_shared<Callable>();
  c->name = name;
  MethodFn fn = it->second;
  Value self = obj;
  c->fn = [fn, self](Interp& in, CallArgs& a) -> Value {
    Value r = fn(in, self, a);
    if (in.tracking()) in.inherit(r, self, &a);
    return r;
  };
  return Value::func(std::move(c));
}

void add_builtin_globals(Frame& root) {
  auto add = [&](const char* name, Value (*fn)(Interp&, CallArgs&)) {
    auto c = std::make_shared<Callable>();
    c->name = name;
    c->fn = fn;
    root.vars[name] = Value::func(std::move(c));
  };
  add("range", g_range);
  add("dict", g_dict);
  add("namespace", g_namespace);
  add("raise_exception", g_raise_exception);
  add("strftime_now", g_strftime_now);
  add("joiner", g_joiner);
  add("cycler", g_cycler);
}

}  // namespace pc::jinja
