// Runtime values of the Jinja interpreter, modelled on the Python objects
// Jinja2 works with (str, int, float, bool, None, list, tuple, dict,
// Undefined, callables), plus the Python-compatible string helpers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pc::jinja {

// A template runtime error (the interpreter adds the location).
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& msg);

class Value;
struct Dict;
struct Callable;
class Interp;

using ValueList = std::vector<Value>;
using ListPtr = std::shared_ptr<ValueList>;
using DictPtr = std::shared_ptr<Dict>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Func };

// Provenance: which part of the caller's data a value (or a byte range of a
// string) came from. Parts are small integers the caller assigns (ChatTemplate
// numbers its tools, messages, content parts and tool calls); kNoPart marks
// template text and values the template computed from nothing tagged.
constexpr int32_t kNoPart = -1;
// Bytes [begin, end) of a string came from `part`. A Runs vector is sorted,
// its runs do not overlap and never have part == kNoPart; bytes no run covers
// are untagged.
struct Run {
  size_t begin;
  size_t end;
  int32_t part;
};
using Runs = std::vector<Run>;
using RunsPtr = std::shared_ptr<const Runs>;

class Value {
 public:
  Value() = default;  // undefined without a name
  Value(bool b) : kind_(Kind::Bool), b_(b) {}
  Value(int v) : kind_(Kind::Int), i_(v) {}
  Value(int64_t v) : kind_(Kind::Int), i_(v) {}
  Value(double v) : kind_(Kind::Float), f_(v) {}
  Value(std::string s) : kind_(Kind::String), s_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}

  static Value none() { Value v; v.kind_ = Kind::None; return v; }
  // An undefined value; `message` is what an operation on it reports
  // (e.g. "'x' is undefined" or "'dict object' has no attribute 'y'").
  static Value undefined(std::string message) {
    Value v;
    v.s_ = std::make_shared<const std::string>(std::move(message));
    return v;
  }
  static Value list(ValueList items) { return make_list(std::move(items), false); }
  static Value tuple(ValueList items) { return make_list(std::move(items), true); }
  static Value dict(DictPtr d) { Value v; v.kind_ = Kind::Dict; v.d_ = std::move(d); return v; }
  static Value new_dict();
  static Value namespace_(DictPtr d) { Value v = dict(std::move(d)); v.flags_ |= kNamespace; return v; }
  static Value func(std::shared_ptr<Callable> f) { Value v; v.kind_ = Kind::Func; v.fn_ = std::move(f); return v; }
  // A string whose bytes came from the parts `runs` names (see Run); a
  // single run covering the whole string is stored as the value's part.
  static Value tagged_string(std::string s, Runs runs);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_tuple() const { return kind_ == Kind::List && (flags_ & kTuple); }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_namespace() const { return kind_ == Kind::Dict && (flags_ & kNamespace); }
  bool is_func() const { return kind_ == Kind::Func; }
  bool is_callable() const { return kind_ == Kind::Func || (kind_ == Kind::Dict && fn_); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *s_; }
  const ValueList& as_list() const { return *l_; }
  const ListPtr& list_ptr() const { return l_; }
  Dict& as_dict() const { return *d_; }
  const DictPtr& dict_ptr() const { return d_; }
  const std::shared_ptr<Callable>& func_ptr() const { return fn_; }
  // A dict that is also callable (the loop object of a recursive loop).
  void set_call(std::shared_ptr<Callable> f) { fn_ = std::move(f); }
  const std::string& undefined_message() const;

  // ---- provenance (only set when a caller tags its data; see Run) ----
  // The part the whole value came from (kNoPart: untagged, or a string
  // whose bytes came from several parts, then runs() says which).
  int32_t part() const { return part_; }
  void set_part(int32_t p) { part_ = p; }
  // Per-byte provenance of a string mixing parts and/or template text;
  // nullptr when the string is uniform (part()) or untagged.
  const Runs* runs() const { return runs_.get(); }
  bool tagged() const { return part_ != kNoPart || runs_ != nullptr; }
  // Appends this string's runs, shifted by `offset`, to `out` (merging with
  // a touching run of the same part). Precondition: is_string().
  void append_runs(size_t offset, Runs& out) const;

  // Python truthiness.
  bool truthy() const;
  // str(value) as Jinja prints it (undefined -> "", None -> "None", ...).
  std::string str() const;
  // Python repr().
  std::string repr() const;
  // Python type name for error messages ("str", "int", "dict", ...).
  std::string type_name() const;

 private:
  static constexpr uint8_t kTuple = 1, kNamespace = 2;
  static Value make_list(ValueList items, bool tuple) {
    Value v;
    v.kind_ = Kind::List;
    v.l_ = std::make_shared<ValueList>(std::move(items));
    if (tuple) v.flags_ |= kTuple;
    return v;
  }

  Kind kind_ = Kind::Undefined;
  uint8_t flags_ = 0;
  int32_t part_ = kNoPart;  // fits the padding before the union
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const std::string> s_;  // string payload, or undefined message
  ListPtr l_;
  DictPtr d_;
  std::shared_ptr<Callable> fn_;
  RunsPtr runs_;  // strings only
};

// Insertion-ordered dict with string keys.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;

  const Value* find(const std::string& key) const {
    auto it = index.find(key);
    return it == index.end() ? nullptr : &items[it->second].second;
  }
  void set(const std::string& key, Value v) {
    auto it = index.find(key);
    if (it != index.end()) {
      items[it->second].second = std::move(v);
    } else {
      index.emplace(key, items.size());
      items.emplace_back(key, std::move(v));
    }
  }
  size_t size() const { return items.size(); }
};

inline Value Value::new_dict() { return dict(std::make_shared<Dict>()); }

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;

  const Value* kwarg(std::string_view name) const {
    for (auto& [k, v] : kw)
      if (k == name) return &v;
    return nullptr;
  }
  // Argument `name` at position `index`, or its keyword, or nullptr.
  const Value* get(size_t index, std::string_view name) const {
    if (index < pos.size()) return &pos[index];
    return kwarg(name);
  }
};

struct Callable {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> fn;
};

// ---- comparisons (Python semantics) ----
bool values_equal(const Value& a, const Value& b);
// Three-way compare; throws on unorderable types.
int values_compare(const Value& a, const Value& b);

// ---- conversions ----
// part: the provenance given to the value and everything inside it.
// Objects keep their key order (ordered_json), as a Python dict keeps the order
// the request gave.
Value from_json(const nlohmann::ordered_json& j, int32_t part = kNoPart);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=...).
// indent: nullptr for none, otherwise the per-level indent string.
// runs: when non-null, receives the provenance of the output's bytes (each
// value's bytes belong to its part, or to its container's when untagged;
// a string mixing parts gives its whole encoding to its first part).
std::string to_json(const Value& v, const std::string* indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys, Runs* runs = nullptr);
// str(v) carrying provenance like to_json's runs (strings keep theirs).
Value tracked_str(const Value& v);
// Appends run [begin, end) -> part to `runs`, merging with the last run when
// it touches and has the same part. Empty runs and kNoPart are ignored.
void push_run(Runs& runs, size_t begin, size_t end, int32_t part);
std::string py_float_repr(double d);
std::string py_str_repr(const std::string& s);

// ---- UTF-8 / Python str helpers ----
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);
bool py_isspace(char32_t c);
char32_t py_upper(char32_t c);
char32_t py_lower(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
// str.strip / lstrip / rstrip; chars == nullptr: whitespace.
std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit); sep == nullptr: runs of whitespace.
std::vector<std::string> str_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> str_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string str_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::vector<std::string> str_splitlines(std::string_view s, bool keepends);

}  // namespace pc::jinja
