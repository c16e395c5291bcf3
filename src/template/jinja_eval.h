// Tree-walking interpreter for parsed Jinja templates, with the limits that
// make it safe to run templates shipped inside user-supplied model files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_value.h"

namespace pc::jinja {

struct Limits {
  size_t max_output = 64u << 20;      // bytes of rendered output (and of any one string)
  size_t max_list = 1u << 20;         // elements of any one list built by the template
  uint64_t max_steps = 5'000'000;     // statements executed + loop iterations + calls
  int max_call_depth = 100;           // nested macro calls / recursive loop levels
  int max_eval_depth = 1000;          // nested evaluation (C++ stack guard)
};

// raise_exception(msg) in a template: propagates out with exactly `msg`.
struct RaiseError {
  std::string message;
};

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;

  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

// What a template body writes: its text and, when the interpreter tracks
// provenance, the runs of the text's bytes that came from tagged data.
struct Output {
  std::string text;
  Runs runs;
  // Top-level output only (else nullptr): receives text.size() after each
  // write, so two renderings can be compared write by write.
  std::vector<size_t>* writes = nullptr;
};

class Interp {
 public:
  explicit Interp(Limits limits = {}) : limits_(limits) {}

  // Renders `t` with the given variables (plus the built-in globals).
  // Throws RaiseError for raise_exception, ChatTemplateError otherwise.
  std::string render(const Template& t, const std::vector<std::pair<std::string, Value>>& vars);
  // render() that also tracks provenance: string values carry the parts of
  // tagged inputs (Value::part/runs) through concatenation, filters, methods,
  // slicing, formatting and printing, and the output records them. writes:
  // see Output::writes (may be null).
  Output render_tracked(const Template& t, const std::vector<std::pair<std::string, Value>>& vars,
                        std::vector<size_t>* writes);

  // ---- used by the built-ins ----
  Value eval(const Expr& e, const FramePtr& f);
  Value call(const Value& callee, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
  bool apply_test(const std::string& name, const Value& v, CallArgs& args);
  bool has_filter(const std::string& name) const;
  bool has_test(const std::string& name) const;
  // Python binary operator (+ - * / // % ** ~).
  Value binop(const std::string& op, const Value& a, const Value& b) { return eval_binop(op, a, b); }
  // Elements of an iterable (list/tuple items, dict keys, string characters;
  // undefined -> empty). Throws for non-iterables.
  ValueList iterate(const Value& v);
  void tick(uint64_t n = 1);
  void check_string(size_t size) const;
  void check_list(size_t size) const;
  const Limits& limits() const { return limits_; }
  // Whether this rendering tracks provenance (render_tracked).
  bool tracking() const { return tracking_; }
  // Gives `result`, computed from `self` and `args` by a filter or method,
  // the provenance of its inputs when it has none of its own (strings, and
  // the strings directly inside a list/tuple result):
  //  - when every tagged input is uniformly one part, that part;
  //  - else when the result occurs in the text of the first tagged input
  //    (a string, or the tracked str() of a container), that range's runs;
  //  - else the first tagged input's first part.
  // Does nothing unless tracking().
  void inherit(Value& result, const Value& self, const CallArgs* args);

 private:
  void run(const Template& t, const std::vector<std::pair<std::string, Value>>& vars, Output& out);
  Flow exec(const StmtList& body, const FramePtr& f, Output& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& f, Output& out);
  void exec_for(const Stmt& s, const FramePtr& f, Output& out, const Value& iterable, int depth);
  void assign(const Target& t, const Value& v, const FramePtr& f);
  Value eval_inner(const Expr& e, const FramePtr& f);
  Value eval_filter(const Expr& e, const FramePtr& f, const Value* inject);
  void eval_call_args(const Expr& e, size_t first, const FramePtr& f, CallArgs& args);
  Value eval_binop(const std::string& op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e, const FramePtr& f);
  Value make_macro(const Stmt& s, const FramePtr& f, bool is_caller);
  void append_out(Output& out, const std::string& s);
  void append_out(Output& out, const Value& v);  // str(v), with its provenance
  Value concat(const Value& a, const Value& b);  // a ~ b, or str + str
  // The string a body wrote, keeping its provenance.
  static Value output_value(Output&& o) { return Value::tagged_string(std::move(o.text), std::move(o.runs)); }

  Limits limits_;
  bool tracking_ = false;
  FramePtr root_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int line_ = 0;
  int col_ = 0;
};

// Built-in global functions (range, dict, namespace, raise_exception,
// strftime_now, joiner, cycler) added to the root frame.
void add_builtin_globals(Frame& root);

// Methods of str / dict / list values (obj.method). Returns an undefined
// value when obj has no such method.
// *found is set when obj has the attribute (an unsafe one yields an undefined
// value that fails with the sandbox's message when used).
Value bound_method(const Value& obj, const std::string& name, bool* found);

}  // namespace pc::jinja
