#include "template/jinja_eval.h"

#include <cmath>
#include <limits>
#include <new>

#include "template/chat_template.h"

namespace pc::jinja {

namespace {

// Jinja's object_type_repr.
std::string obj_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  if (v.is_dict() && v.is_callable()) return "jinja2.runtime.LoopContext object";
  if (v.is_func()) return "function object";
  return v.type_name() + " object";
}

Value undefined_attr(const Value& obj, const std::string& name) {
  return Value::undefined("'" + obj_repr(obj) + "' has no attribute '" + name + "'");
}

Value undefined_elem(const Value& obj, const Value& key) {
  return Value::undefined(obj_repr(obj) + " has no element " + key.repr());
}

[[noreturn]] void fail_undefined(const Value& v) { fail(v.undefined_message()); }

int64_t checked_int(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  fail(std::string(what) + " must be integers or None");
}

// Python slice index normalization (PySlice_AdjustIndices).
std::vector<size_t> slice_indices(size_t len, const Value& vstart, const Value& vstop, const Value& vstep) {
  int64_t n = static_cast<int64_t>(len);
  int64_t step = vstep.is_none() || vstep.is_undefined() ? 1 : checked_int(vstep, "slice indices");
  if (step == 0) fail("slice step cannot be zero");
  int64_t start, stop;
  if (vstart.is_none() || vstart.is_undefined()) {
    start = step < 0 ? n - 1 : 0;
  } else {
    start = checked_int(vstart, "slice indices");
    if (start < 0) {
      start += n;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= n) {
      start = step < 0 ? n - 1 : n;
    }
  }
  if (vstop.is_none() || vstop.is_undefined()) {
    stop = step < 0 ? -1 : n;
  } else {
    stop = checked_int(vstop, "slice indices");
    if (stop < 0) {
      stop += n;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= n) {
      stop = step < 0 ? n - 1 : n;
    }
  }
  std::vector<size_t> idx;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) idx.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = start; i > stop; i += step) idx.push_back(static_cast<size_t>(i));
  }
  return idx;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::List:
      for (const auto& x : container.as_list())
        if (values_equal(x, item)) return true;
      return false;
    case Kind::Dict:
      if (container.is_namespace() || container.is_callable())
        fail("argument of type '" + container.type_name() + "' is not iterable");
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    case Kind::Undefined: return false;
    default: fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::string location(int line, int col) {
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + ": ";
}

}  // namespace

// ---------------------------------------------------------------------------

void Interp::tick(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) fail("template exceeded its step limit");
}

void Interp::check_string(size_t size) const {
  if (size > limits_.max_output) fail("string exceeds the size limit");
}

void Interp::check_list(size_t size) const {
  if (size > limits_.max_list) fail("list exceeds the size limit");
}

void Interp::append_out(Output& out, const std::string& s) {
  if (out.text.size() + s.size() > limits_.max_output) fail("template output exceeds the size limit");
  out.text += s;
  if (out.writes) out.writes->push_back(out.text.size());
}

void Interp::append_out(Output& out, const Value& v) {
  if (!tracking_) {
    if (v.is_string()) append_out(out, v.as_string());
    else append_out(out, v.str());
    return;
  }
  Value t = tracked_str(v);
  const size_t at = out.text.size();
  append_out(out, t.as_string());
  t.append_runs(at, out.runs);
}

Value Interp::concat(const Value& a, const Value& b) {
  if (!tracking_ || (!a.tagged() && !b.tagged() && a.is_string() && b.is_string())) {
    std::string s = a.str();
    s += b.str();
    check_string(s.size());
    return Value(std::move(s));
  }
  Value ta = tracked_str(a);
  Value tb = tracked_str(b);
  std::string s = ta.as_string();
  s += tb.as_string();
  check_string(s.size());
  Runs runs;
  ta.append_runs(0, runs);
  tb.append_runs(ta.as_string().size(), runs);
  return Value::tagged_string(std::move(s), std::move(runs));
}

namespace {

// Whether every tagged thing in v came from part p (untagged things are
// ignored; a string mixing parts never qualifies).
bool uniformly(const Value& v, int32_t p, int depth = 0) {
  if (v.runs()) return false;
  if (v.part() != kNoPart && v.part() != p) return false;
  if (depth > 64) return false;
  if (v.is_list()) {
    for (const auto& x : v.as_list())
      if (!uniformly(x, p, depth + 1)) return false;
  } else if (v.is_dict() && !v.is_namespace() && !v.is_callable()) {
    for (const auto& kv : v.as_dict().items)
      if (!uniformly(kv.second, p, depth + 1)) return false;
  }
  return true;
}

// The first part anything in v came from.
int32_t first_part(const Value& v) {
  if (v.part() != kNoPart) return v.part();
  if (v.runs()) return v.runs()->front().part;
  Value t = tracked_str(v);
  if (t.part() != kNoPart) return t.part();
  return t.runs() ? t.runs()->front().part : kNoPart;
}

// The runs of text's bytes [begin, end), relative to begin.
Runs slice_runs(const Value& text, size_t begin, size_t end) {
  Runs out;
  if (text.part() != kNoPart) {
    push_run(out, 0, end - begin, text.part());
  } else if (text.runs()) {
    for (const Run& r : *text.runs())
      if (r.end > begin && r.begin < end) push_run(out, std::max(r.begin, begin) - begin, std::min(r.end, end) - begin, r.part);
  }
  return out;
}

bool untagged_string(const Value& v) { return v.is_string() && !v.tagged(); }

bool needs_tags(const Value& r) {
  if (untagged_string(r)) return true;
  if (!r.is_list()) return false;
  for (const auto& x : r.as_list()) {
    if (untagged_string(x)) return true;
    if (x.is_tuple())
      for (const auto& y : x.as_list())
        if (untagged_string(y)) return true;
  }
  return false;
}

}  // namespace

void Interp::inherit(Value& result, const Value& self, const CallArgs* args) {
  if (!tracking_ || !needs_tags(result)) return;
  std::vector<const Value*> inputs;
  auto add = [&](const Value& v) {
    if (v.tagged()) {
      inputs.push_back(&v);
    } else if (v.is_list()) {  // e.g. join over tagged strings
      for (const auto& x : v.as_list())
        if (x.tagged()) inputs.push_back(&x);
    }
  };
  add(self);
  if (args) {
    for (const auto& v : args->pos) add(v);
    for (const auto& kv : args->kw) add(kv.second);
  }
  if (inputs.empty()) return;
  int32_t p = first_part(*inputs[0]);
  bool uniform = p != kNoPart;
  for (const Value* v : inputs) uniform = uniform && uniformly(*v, p);
  Value text;  // computed on first use
  auto tag = [&](Value& r) {
    if (!untagged_string(r)) return;
    if (uniform) {
      r.set_part(p);
      return;
    }
    if (text.is_undefined()) text = tracked_str(*inputs[0]);
    const std::string& s = r.as_string();
    size_t at = s.empty() ? std::string::npos : text.as_string().find(s);
    if (at != std::string::npos) r = Value::tagged_string(s, slice_runs(text, at, at + s.size()));
    else r.set_part(p);
  };
  if (result.is_string()) {
    tag(result);
    return;
  }
  // Lists are immutable once built: tag a copy.
  ValueList items = result.as_list();
  for (auto& x : items) {
    if (x.is_tuple()) {
      ValueList inner = x.as_list();
      for (auto& y : inner) tag(y);
      Value t = Value::tuple(std::move(inner));
      t.set_part(x.part());
      x = std::move(t);
    } else {
      tag(x);
    }
  }
  Value r = result.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  r.set_part(result.part());
  result = std::move(r);
}

std::string Interp::render(const Template& t, const std::vector<std::pair<std::string, Value>>& vars) {
  tracking_ = false;
  Output out;
  run(t, vars, out);
  return std::move(out.text);
}

Output Interp::render_tracked(const Template& t, const std::vector<std::pair<std::string, Value>>& vars,
                              std::vector<size_t>* writes) {
  tracking_ = true;
  Output out;
  out.writes = writes;
  run(t, vars, out);
  out.writes = nullptr;
  return out;
}

void Interp::run(const Template& t, const std::vector<std::pair<std::string, Value>>& vars, Output& out) {
  root_ = std::make_shared<Frame>();
  add_builtin_globals(*root_);
  for (const auto& [k, v] : vars) root_->vars[k] = v;
  steps_ = 0;
  call_depth_ = 0;
  eval_depth_ = 0;
  struct Reset {
    FramePtr& r;
    ~Reset() { r.reset(); }
  } reset{root_};
  try {
    exec(t.body, root_, out);
  } catch (const RaiseError& e) {
    throw ChatTemplateError(e.message);
  } catch (const RuntimeError& e) {
    throw ChatTemplateError(location(line_, col_) + e.what(), line_, col_);
  } catch (const ChatTemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw ChatTemplateError(location(line_, col_) + "out of memory while rendering the template", line_, col_);
  } catch (const std::exception& e) {
    throw ChatTemplateError(location(line_, col_) + e.what(), line_, col_);
  }
}

Flow Interp::exec(const StmtList& body, const FramePtr& f, Output& out) {
  for (const auto& s : body) {
    Flow fl = exec_stmt(*s, f, out);
    if (fl != Flow::Normal) return fl;
  }
  return Flow::Normal;
}

Flow Interp::exec_stmt(const Stmt& s, const FramePtr& f, Output& out) {
  tick();
  if (eval_depth_ >= limits_.max_eval_depth) fail("maximum recursion depth exceeded");
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(x) { ++d; }
    ~Depth() { --d; }
  } depth(eval_depth_);
  line_ = s.line;
  col_ = s.col;
  switch (s.kind) {
    case StmtKind::Text: append_out(out, s.text); return Flow::Normal;
    case StmtKind::Output: {
      append_out(out, eval(*s.expr, f));
      return Flow::Normal;
    }
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches) {
        if (!cond || eval(*cond, f).truthy()) return exec(body, f, out);
      }
      return Flow::Normal;
    case StmtKind::For: {
      Value it = eval(*s.expr, f);
      exec_for(s, f, out, it, 1);
      return Flow::Normal;
    }
    case StmtKind::Set: assign(s.target, eval(*s.expr, f), f); return Flow::Normal;
    case StmtKind::SetBlock: {
      auto inner = std::make_shared<Frame>();
      inner->parent = f;
      Output buf;
      exec(s.body, inner, buf);
      Value v = output_value(std::move(buf));
      if (s.expr) v = eval_filter(*s.expr, f, &v);
      assign(s.target, v, f);
      return Flow::Normal;
    }
    case StmtKind::Macro: f->vars[s.name] = make_macro(s, f, false); return Flow::Normal;
    case StmtKind::CallBlock: {
      Value caller = make_macro(s, f, true);
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.args[0], f);
      CallArgs args;
      eval_call_args(call_expr, 1, f, args);
      args.kw.emplace_back("caller", caller);
      append_out(out, call(callee, args));
      return Flow::Normal;
    }
    case StmtKind::FilterBlock: {
      auto inner = std::make_shared<Frame>();
      inner->parent = f;
      Output buf;
      exec(s.body, inner, buf);
      Value v = output_value(std::move(buf));
      append_out(out, eval_filter(*s.expr, f, &v));
      return Flow::Normal;
    }
    case StmtKind::With: {
      auto inner = std::make_shared<Frame>();
      inner->parent = f;
      for (const auto& [target, expr] : s.assigns) assign(target, eval(*expr, f), inner);
      return exec(s.body, inner, out);
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Scope: return exec(s.body, f, out);
  }
  return Flow::Normal;
}

void Interp::assign(const Target& t, const Value& v, const FramePtr& f) {
  if (!t.attr.empty()) {
    const Value* ns = f->lookup(t.names[0]);
    if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object");
    ns->as_dict().set(t.attr, v);
    return;
  }
  if (!t.tuple) {
    f->vars[t.names[0]] = v;
    return;
  }
  if (v.is_undefined()) fail_undefined(v);
  ValueList items = iterate(v);
  if (items.size() > t.names.size())
    fail("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
  if (items.size() < t.names.size())
    fail("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
         std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) f->vars[t.names[i]] = items[i];
}

ValueList Interp::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::List: return v.as_list();
    case Kind::Dict: {
      if (v.is_namespace() || v.is_callable()) break;
      ValueList keys;
      keys.reserve(v.as_dict().size());
      for (const auto& kv : v.as_dict().items) {
        keys.emplace_back(kv.first);
        if (tracking_) keys.back().set_part(v.part());
      }
      return keys;
    }
    case Kind::String: {
      ValueList chars;
      const std::string& s = v.as_string();
      if (is_ascii(s)) {
        chars.reserve(s.size());
        for (char c : s) chars.emplace_back(std::string(1, c));
      } else {
        for (char32_t c : utf8_decode(s)) {
          std::string one;
          utf8_append(one, c);
          chars.emplace_back(std::move(one));
        }
      }
      if (tracking_ && v.tagged()) {
        size_t at = 0;
        for (auto& c : chars) {
          size_t n = c.as_string().size();
          c = Value::tagged_string(c.as_string(), slice_runs(v, at, at + n));
          at += n;
        }
      }
      return chars;
    }
    case Kind::Undefined: return {};
    default: break;
  }
  fail("'" + v.type_name() + "' object is not iterable");
}

void Interp::exec_for(const Stmt& s, const FramePtr& f, Output& out, const Value& iterable, int depth) {
  // Lists are immutable once built, so a plain list is iterated in place.
  ListPtr holder = iterable.is_list() && !s.cond ? iterable.list_ptr() : std::make_shared<ValueList>(iterate(iterable));
  ValueList& items = *holder;
  if (s.cond) {
    auto tmp = std::make_shared<Frame>();
    tmp->parent = f;
    ValueList kept;
    for (auto& item : items) {
      tick();
      tmp->vars.clear();
      assign(s.target, item, tmp);
      if (eval(*s.cond, tmp).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.else_body.empty()) exec(s.else_body, f, out);
    return;
  }
  const size_t n = items.size();
  auto lf = std::make_shared<Frame>();
  lf->parent = f;
  auto index = std::make_shared<size_t>(0);

  auto cycle = std::make_shared<Callable>();
  cycle->name = "cycle";
  cycle->fn = [index](Interp&, CallArgs& a) -> Value {
    if (a.pos.empty()) fail("no items for cycling given");
    return a.pos[*index % a.pos.size()];
  };
  auto changed = std::make_shared<Callable>();
  changed->name = "changed";
  auto last_changed = std::make_shared<Value>(Value::undefined("no previous value"));
  auto has_last = std::make_shared<bool>(false);
  changed->fn = [last_changed, has_last](Interp&, CallArgs& a) -> Value {
    Value cur = Value::tuple(a.pos);
    if (*has_last && values_equal(cur, *last_changed)) return Value(false);
    *last_changed = cur;
    *has_last = true;
    return Value(true);
  };
  std::shared_ptr<Callable> recurse;
  if (s.recursive) {
    recurse = std::make_shared<Callable>();
    recurse->name = "loop";
    std::weak_ptr<Frame> wf = f;
    const Stmt* sp = &s;
    recurse->fn = [sp, wf, depth](Interp& in, CallArgs& a) -> Value {
      if (a.pos.size() != 1) fail("loop() takes exactly one argument");
      if (depth + 1 > in.limits_.max_call_depth) fail("maximum recursion depth exceeded");
      FramePtr parent = wf.lock();
      if (!parent) parent = in.root_;
      Output o;
      in.exec_for(*sp, parent, o, a.pos[0], depth + 1);
      return output_value(std::move(o));
    };
  }

  // One loop object per loop, advanced in place (like Jinja's LoopContext).
  auto d = std::make_shared<Dict>();
  const char* kKeys[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                         "depth", "depth0", "previtem", "nextitem", "cycle", "changed"};
  for (const char* k : kKeys) d->set(k, Value());
  Value* slot[13];
  for (size_t k = 0; k < 13; ++k) slot[k] = &d->items[k].second;
  *slot[6] = Value(static_cast<int64_t>(n));
  *slot[7] = Value(static_cast<int64_t>(depth));
  *slot[8] = Value(static_cast<int64_t>(depth - 1));
  *slot[11] = Value::func(cycle);
  *slot[12] = Value::func(changed);
  Value loop = Value::dict(d);
  if (recurse) loop.set_call(recurse);
  const Value no_prev = Value::undefined("there is no previous item");
  const Value no_next = Value::undefined("there is no next item");

  for (size_t i = 0; i < n; ++i) {
    tick();
    *index = i;
    lf->vars.clear();
    assign(s.target, items[i], lf);
    *slot[0] = Value(static_cast<int64_t>(i + 1));
    *slot[1] = Value(static_cast<int64_t>(i));
    *slot[2] = Value(static_cast<int64_t>(n - i));
    *slot[3] = Value(static_cast<int64_t>(n - i - 1));
    *slot[4] = Value(i == 0);
    *slot[5] = Value(i + 1 == n);
    *slot[9] = i > 0 ? items[i - 1] : no_prev;
    *slot[10] = i + 1 < n ? items[i + 1] : no_next;
    lf->vars["loop"] = loop;
    Flow fl = exec(s.body, lf, out);
    if (fl == Flow::Break) break;
  }
}

Value Interp::make_macro(const Stmt& s, const FramePtr& f, bool is_caller) {
  auto c = std::make_shared<Callable>();
  c->name = is_caller ? "caller" : s.name;
  std::weak_ptr<Frame> wf = f;
  const Stmt* sp = &s;
  c->fn = [sp, wf](Interp& in, CallArgs& args) -> Value {
    if (in.call_depth_ + 1 > in.limits_.max_call_depth) fail("maximum recursion depth exceeded");
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth(in.call_depth_);
    in.tick();
    FramePtr parent = wf.lock();
    if (!parent) parent = in.root_;
    auto mf = std::make_shared<Frame>();
    mf->parent = parent;
    const auto& params = sp->params;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = params[i].name;
      if (i < args.pos.size()) {
        if (args.kwarg(name)) fail("macro got multiple values for argument '" + name + "'");
        mf->vars[name] = args.pos[i];
      } else if (const Value* kv = args.kwarg(name)) {
        mf->vars[name] = *kv;
      } else if (params[i].default_value) {
        mf->vars[name] = in.eval(*params[i].default_value, mf);
      } else {
        mf->vars[name] = Value::undefined("parameter '" + name + "' was not provided");
      }
    }
    ValueList varargs;
    for (size_t i = params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
    auto kwargs = std::make_shared<Dict>();
    for (const auto& [k, v] : args.kw) {
      bool is_param = false;
      for (const auto& p : params)
        if (p.name == k) is_param = true;
      if (is_param) continue;
      if (k == "caller") mf->vars["caller"] = v;
      else kwargs->set(k, v);
    }
    mf->vars["varargs"] = Value::tuple(std::move(varargs));
    mf->vars["kwargs"] = Value::dict(std::move(kwargs));
    Output out;
    in.exec(sp->body, mf, out);
    return output_value(std::move(out));
  };
  return Value::func(std::move(c));
}

// ---------------------------------------------------------------------------
// expressions

Value Interp::eval(const Expr& e, const FramePtr& f) {
  if (eval_depth_ >= limits_.max_eval_depth) fail("maximum recursion depth exceeded");
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(x) { ++d; }
    ~Depth() { --d; }
  } depth(eval_depth_);
  return eval_inner(e, f);
}

void Interp::eval_call_args(const Expr& e, size_t first, const FramePtr& f, CallArgs& args) {
  for (size_t i = first; i < e.args.size(); ++i) args.pos.push_back(eval(*e.args[i], f));
  if (e.dyn_args) {
    Value extra = eval(*e.dyn_args, f);
    for (auto& v : iterate(extra)) args.pos.push_back(std::move(v));
  }
  for (const auto& [k, v] : e.kwargs) args.kw.emplace_back(k, eval(*v, f));
  if (e.dyn_kwargs) {
    Value extra = eval(*e.dyn_kwargs, f);
    if (!extra.is_dict() || extra.is_namespace()) fail("argument after ** must be a mapping");
    for (const auto& [k, v] : extra.as_dict().items) args.kw.emplace_back(k, v);
  }
}

Value Interp::eval_filter(const Expr& e, const FramePtr& f, const Value* inject) {
  Value operand;
  if (e.args[0]) {
    operand = e.args[0]->kind == ExprKind::Filter ? eval_filter(*e.args[0], f, inject) : eval(*e.args[0], f);
  } else if (inject) {
    operand = *inject;
  }
  CallArgs args;
  eval_call_args(e, 1, f, args);
  line_ = e.line;
  col_ = e.col;
  return apply_filter(e.name, operand, args);
}

Value Interp::eval_inner(const Expr& e, const FramePtr& f) {
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: {
      const Value* v = f->lookup(e.name);
      if (v) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::GetAttr: {
      Value obj = eval(*e.args[0], f);
      line_ = e.line;
      col_ = e.col;
      return getattr(obj, e.name);
    }
    case ExprKind::GetItem: {
      Value obj = eval(*e.args[0], f);
      Value key = eval(*e.args[1], f);
      line_ = e.line;
      col_ = e.col;
      return getitem(obj, key);
    }
    case ExprKind::Slice: {
      Value obj = eval(*e.args[0], f);
      Value a = e.args[1] ? eval(*e.args[1], f) : Value::none();
      Value b = e.args[2] ? eval(*e.args[2], f) : Value::none();
      Value c = e.args[3] ? eval(*e.args[3], f) : Value::none();
      line_ = e.line;
      col_ = e.col;
      if (obj.is_undefined()) fail_undefined(obj);
      if (obj.is_list()) {
        const auto& l = obj.as_list();
        ValueList r;
        for (size_t i : slice_indices(l.size(), a, b, c)) r.push_back(l[i]);
        return obj.is_tuple() ? Value::tuple(std::move(r)) : Value::list(std::move(r));
      }
      if (obj.is_string()) {
        const std::string& s = obj.as_string();
        std::string r;
        if (is_ascii(s)) {
          for (size_t i : slice_indices(s.size(), a, b, c)) r += s[i];
        } else {
          std::u32string u = utf8_decode(s);
          for (size_t i : slice_indices(u.size(), a, b, c)) utf8_append(r, u[i]);
        }
        Value rv(std::move(r));
        if (tracking_) inherit(rv, obj, nullptr);
        return rv;
      }
      return Value::undefined("'" + obj_repr(obj) + "' is not subscriptable");
    }
    case ExprKind::Call: {
      Value callee = eval(*e.args[0], f);
      CallArgs args;
      eval_call_args(e, 1, f, args);
      line_ = e.line;
      col_ = e.col;
      return call(callee, args);
    }
    case ExprKind::Filter: return eval_filter(e, f, nullptr);
    case ExprKind::Test: {
      Value v = eval(*e.args[0], f);
      CallArgs args;
      eval_call_args(e, 1, f, args);
      line_ = e.line;
      col_ = e.col;
      return Value(apply_test(e.name, v, args));
    }
    case ExprKind::Not: return Value(!eval(*e.args[0], f).truthy());
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.args[0], f);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number())
        fail(std::string("bad operand type for unary ") + (e.kind == ExprKind::Neg ? "-" : "+") + ": '" +
             v.type_name() + "'");
      if (e.kind == ExprKind::Pos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow");
      return Value(-v.as_int());
    }
    case ExprKind::BinOp: {
      Value a = eval(*e.args[0], f);
      Value b = eval(*e.args[1], f);
      line_ = e.line;
      col_ = e.col;
      return eval_binop(e.name, a, b);
    }
    case ExprKind::Compare: return eval_compare(e, f);
    case ExprKind::And: {
      Value a = eval(*e.args[0], f);
      if (!a.truthy()) return a;
      return eval(*e.args[1], f);
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0], f);
      if (a.truthy()) return a;
      return eval(*e.args[1], f);
    }
    case ExprKind::CondExpr: {
      if (eval(*e.args[0], f).truthy()) return eval(*e.args[1], f);
      if (e.args[2]) return eval(*e.args[2], f);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::ListLit:
    case ExprKind::TupleLit: {
      ValueList items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, f));
      return e.kind == ExprKind::ListLit ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::DictLit: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], f);
        Value v = eval(*e.args[i + 1], f);
        d->set(k.is_string() ? k.as_string() : k.str(), std::move(v));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value();
}

Value Interp::eval_compare(const Expr& e, const FramePtr& f) {
  Value left = eval(*e.args[0], f);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], f);
    line_ = e.line;
    col_ = e.col;
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = values_equal(left, right);
    else if (op == "!=") r = !values_equal(left, right);
    else if (op == "in") r = contains(right, left);
    else if (op == "notin") r = !contains(right, left);
    else {
      int c = values_compare(left, right);
      if (op == "<") r = c < 0;
      else if (op == "<=") r = c <= 0;
      else if (op == ">") r = c > 0;
      else r = c >= 0;
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

// printf-style `str % args` (the common conversions).
static std::string percent_format(Interp& in, const std::string& fmt, const Value& arg) {
  ValueList args;
  const Dict* mapping = nullptr;
  if (arg.is_tuple()) args = arg.as_list();
  else if (arg.is_dict() && !arg.is_namespace()) mapping = &arg.as_dict();
  else args.push_back(arg);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    const Value* v = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) fail("format requires a mapping");
      v = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!v) fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ 0#").find(fmt[i]) != std::string::npos) flags += fmt[i++];
    std::string width;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) width += fmt[i++];
    std::string prec;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = ".";
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) prec += fmt[i++];
    }
    if (i >= fmt.size()) fail("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!v) {
      if (mapping && args.empty()) fail("format requires a mapping");
      if (next >= args.size()) fail("not enough arguments for format string");
      v = &args[next++];
    }
    std::string piece;
    char buf[512];
    std::string spec = "%" + flags + width.substr(0, 3) + prec.substr(0, 4);
    switch (conv) {
      case 's': piece = v->str(); break;
      case 'r': piece = v->repr(); break;
      case 'd':
      case 'i':
      case 'u': {
        if (!v->is_number()) fail("%d format: a real number is required, not " + v->type_name());
        int64_t n = v->is_float() ? static_cast<int64_t>(v->as_float()) : v->as_int();
        std::snprintf(buf, sizeof(buf), (spec + "lld").c_str(), static_cast<long long>(n));
        piece = buf;
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        if (!v->is_int() && !v->is_bool()) fail("%x format: an integer is required");
        std::snprintf(buf, sizeof(buf), (spec + "ll" + conv).c_str(), static_cast<long long>(v->as_int()));
        piece = buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v->is_number()) fail("must be real number, not " + v->type_name());
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v->as_float());
        piece = buf;
        break;
      }
      case 'c': piece = v->str(); break;
      default: fail(std::string("unsupported format character '") + conv + "'");
    }
    if ((conv == 's' || conv == 'r') && !width.empty()) {
      size_t w = std::min<size_t>(std::stoul(width.substr(0, 4)), 1000);
      size_t len = utf8_length(piece);
      if (len < w) {
        if (flags.find('-') != std::string::npos) piece.append(w - len, ' ');
        else piece.insert(0, w - len, ' ');
      }
    }
    out += piece;
    in.check_string(out.size());
  }
  if (!mapping && next < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value Interp::eval_binop(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return concat(a, b);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const char o = op[0];
  auto unsupported = [&]() -> Value {
    fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (a.is_number() && b.is_number()) {
    bool fl = a.is_float() || b.is_float();
    if (op == "+" || op == "-" || op == "*") {
      if (fl) {
        double x = a.as_float(), y = b.as_float();
        return Value(o == '+' ? x + y : (o == '-' ? x - y : x * y));
      }
      int64_t x = a.as_int(), y = b.as_int(), r;
      bool ovf = o == '+' ? __builtin_add_overflow(x, y, &r)
                          : (o == '-' ? __builtin_sub_overflow(x, y, &r) : __builtin_mul_overflow(x, y, &r));
      if (ovf) fail("integer overflow");
      return Value(r);
    }
    if (op == "/") {
      if (b.as_float() == 0.0) fail("division by zero");
      return Value(a.as_float() / b.as_float());
    }
    if (op == "//" || op == "%") {
      if (fl) {
        double x = a.as_float(), y = b.as_float();
        if (y == 0.0) fail(op == "//" ? "float floor division by zero" : "float modulo");
        double m = std::fmod(x, y);
        double div = (x - m) / y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          div -= 1.0;
        }
        if (op == "%") return Value(m);
        double fd = std::floor(div);
        if (div - fd > 0.5) fd += 1.0;
        return Value(fd);
      }
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        r += y;
        q -= 1;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    if (op == "**") {
      if (!fl && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), r = 1;
        while (e > 0) {
          if (e & 1)
            if (__builtin_mul_overflow(r, base, &r)) fail("integer overflow");
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
        }
        return Value(r);
      }
      if (a.as_float() == 0.0 && b.as_float() < 0) fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_float(), b.as_float()));
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string(a.as_string().size() + b.as_string().size());
      if (tracking_) return concat(a, b);
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      check_list(a.as_list().size() + b.as_list().size());
      ValueList r = a.as_list();
      r.insert(r.end(), b.as_list().begin(), b.as_list().end());
      tick(r.size() / 64);
      return a.is_tuple() ? Value::tuple(std::move(r)) : Value::list(std::move(r));
    }
    if (a.is_string() || a.is_list())
      fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    return unsupported();
  }
  if (op == "*") {
    const Value* seq = nullptr;
    const Value* cnt = nullptr;
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) seq = &a, cnt = &b;
    else if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) seq = &b, cnt = &a;
    if (!seq) fail("can't multiply sequence by non-int of type '" + b.type_name() + "'");
    int64_t n = std::max<int64_t>(0, cnt->as_int());
    if (seq->is_string()) {
      const std::string& s = seq->as_string();
      if (!s.empty() && static_cast<uint64_t>(n) > limits_.max_output / s.size()) check_string(limits_.max_output + 1);
      std::string r;
      r.reserve(s.size() * n);
      for (int64_t i = 0; i < n; ++i) r += s;
      Value rv(std::move(r));
      if (tracking_) inherit(rv, *seq, nullptr);
      return rv;
    }
    const auto& l = seq->as_list();
    if (!l.empty() && static_cast<uint64_t>(n) > limits_.max_list / l.size()) check_list(limits_.max_list + 1);
    ValueList r;
    for (int64_t i = 0; i < n; ++i) r.insert(r.end(), l.begin(), l.end());
    return seq->is_tuple() ? Value::tuple(std::move(r)) : Value::list(std::move(r));
  }
  if (op == "%" && a.is_string()) {
    Value r(percent_format(*this, a.as_string(), b));
    if (tracking_) {
      CallArgs in;
      in.pos.push_back(b);
      inherit(r, a, &in);
    }
    return r;
  }
  return unsupported();
}

// ---------------------------------------------------------------------------
// attribute / item access and calls

Value Interp::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict: {
      if (obj.is_namespace() || obj.is_callable()) {
        if (const Value* v = obj.as_dict().find(name)) return *v;
        return undefined_attr(obj, name);
      }
      bool found;
      Value m = bound_method(obj, name, &found);
      if (found) return m;
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return undefined_attr(obj, name);
    }
    case Kind::String:
    case Kind::List: {
      bool found;
      Value m = bound_method(obj, name, &found);
      if (found) return m;
      return undefined_attr(obj, name);
    }
    default: return undefined_attr(obj, name);
  }
}

Value Interp::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict:
      if (key.is_string()) {
        if (!obj.is_namespace()) {
          if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
          if (obj.is_callable()) return undefined_attr(obj, key.as_string());
        }
        return getattr(obj, key.as_string());
      }
      return undefined_elem(obj, key);
    case Kind::List:
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        int64_t n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return undefined_elem(obj, key);
        return obj.as_list()[static_cast<size_t>(i)];
      }
      if (key.is_string()) return getattr(obj, key.as_string());
      return undefined_elem(obj, key);
    case Kind::String:
      if (key.is_int() || key.is_bool()) {
        const std::string& s = obj.as_string();
        int64_t i = key.as_int();
        if (is_ascii(s)) {
          int64_t n = static_cast<int64_t>(s.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) return undefined_elem(obj, key);
          Value c(std::string(1, s[static_cast<size_t>(i)]));
          if (tracking_) inherit(c, obj, nullptr);
          return c;
        }
        std::u32string u = utf8_decode(s);
        int64_t n = static_cast<int64_t>(u.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return undefined_elem(obj, key);
        std::string one;
        utf8_append(one, u[static_cast<size_t>(i)]);
        Value c(std::move(one));
        if (tracking_) inherit(c, obj, nullptr);
        return c;
      }
      if (key.is_string()) return getattr(obj, key.as_string());
      return undefined_elem(obj, key);
    default:
      if (key.is_string()) return getattr(obj, key.as_string());
      return undefined_elem(obj, key);
  }
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) fail("'" + callee.type_name() + "' object is not callable");
  tick();
  return callee.func_ptr()->fn(*this, args);
}

}  // namespace pc::jinja
