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

class Interp {
 public:
  explicit Interp(Limits limits = {}) : limits_(limits) {}

  // Renders `t` with the given variables (plus the built-in globals).
  // Throws RaiseError for raise_exception, ChatTemplateError otherwise.
  std::string render(const Template& t, const std::vector<std::pair<std::string, Value>>& vars);

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

 private:
  Flow exec(const StmtList& body, const FramePtr& f, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& f, std::string& out);
  void exec_for(const Stmt& s, const FramePtr& f, std::string& out, const Value& iterable, int depth);
  void assign(const Target& t, const Value& v, const FramePtr& f);
  Value eval_inner(const Expr& e, const FramePtr& f);
  Value eval_filter(const Expr& e, const FramePtr& f, const Value* inject);
  void eval_call_args(const Expr& e, size_t first, const FramePtr& f, CallArgs& args);
  Value eval_binop(const std::string& op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e, const FramePtr& f);
  Value make_macro(const Stmt& s, const FramePtr& f, bool is_caller);
  void append_out(std::string& out, const std::string& s);

  Limits limits_;
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
