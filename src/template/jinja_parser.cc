#include "template/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "template/chat_template.h"

namespace pc::jinja {

namespace {

constexpr int kMaxNesting = 300;     // nested statements / parse recursion units
constexpr int kMaxExprDepth = 300;   // height of one expression tree

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  std::unique_ptr<Template> run() {
    auto t = std::make_unique<Template>();
    t->body = parse_body({});
    return t;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokType::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == TokType::Name && cur().value == n; }
  static bool tok_is_op(const Token& t, const char* op) { return t.type == TokType::Op && t.value == op; }

  [[noreturn]] void error(const std::string& msg, const Token& t) const {
    throw ChatTemplateError("line " + std::to_string(t.line) + ", column " + std::to_string(t.col) + ": " + msg,
                            t.line, t.col);
  }
  [[noreturn]] void error(const std::string& msg) const { error(msg, cur()); }

  void expect_op(const char* op) {
    if (is_op(op)) {
      next();
      return;
    }
    unexpected(std::string("'") + op + "'");
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    if (cur().type == TokType::Eof) error("unexpected end of template, expected " + expected + ".");
    error("expected token " + expected + ", got '" + describe_token(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().type != TokType::Name) unexpected("'name'");
    return next().value;
  }
  void expect_block_end() {
    if (cur().type == TokType::BlockEnd) {
      next();
      return;
    }
    unexpected("'end of statement block'");
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("template nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr mk(ExprKind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  // Computes the height of a finished node; rejects trees too deep to
  // evaluate (or destroy) with bounded stack.
  ExprPtr fin(ExprPtr e) {
    int d = 0;
    auto see = [&](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    for (const auto& c : e->args) see(c);
    for (const auto& kv : e->kwargs) see(kv.second);
    see(e->dyn_args);
    see(e->dyn_kwargs);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) error("expression nesting too deep", cur());
    return e;
  }

  StmtPtr mks(StmtKind k, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // ---- statements ----
  StmtList parse_body(std::initializer_list<const char*> end_names) {
    StmtList body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokType::Eof) {
        if (end_names.size() == 0) return body;
        std::string names;
        for (const char* n : end_names) {
          if (!names.empty()) names += " or ";
          names += std::string("'") + n + "'";
        }
        error("Unexpected end of template. Jinja was looking for the following tags: " + names + ".");
      }
      if (t.type == TokType::Data) {
        auto s = mks(StmtKind::Text, t);
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokType::VarBegin) {
        auto s = mks(StmtKind::Output, t);
        next();
        s->expr = parse_tuple(false, true, {}, false);
        if (cur().type != TokType::VarEnd) unexpected("'end of print statement'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokType::BlockBegin) {
        const Token& name = peek();
        if (name.type == TokType::Name) {
          for (const char* n : end_names)
            if (name.value == n) {
              next();  // leave the tag name current
              return body;
            }
        }
        next();
        body.push_back(parse_statement());
      } else {
        error("unexpected '" + describe_token(t) + "'");
      }
    }
  }

  StmtPtr parse_statement() {
    DepthGuard guard(*this);
    const Token& t = cur();
    if (t.type != TokType::Name) error("tag name expected");
    const std::string& n = t.value;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call_block();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "break" || n == "continue") {
      auto s = mks(n == "break" ? StmtKind::Break : StmtKind::Continue, t);
      next();
      expect_block_end();
      return s;
    }
    if (n == "generation") {
      auto s = mks(StmtKind::Scope, t);
      next();
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (n == "print") {
      auto s = mks(StmtKind::Output, t);
      next();
      s->expr = parse_tuple(false, true, {}, false);
      expect_block_end();
      return s;
    }
    error("Encountered unknown tag '" + n + "'.");
  }

  StmtPtr parse_if() {
    auto s = mks(StmtKind::If, cur());
    next();
    while (true) {
      ExprPtr cond = parse_tuple(false, false, {}, false);
      expect_block_end();
      StmtList body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string tag = next().value;
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->branches.emplace_back(nullptr, parse_body({"endif"}));
        next();
      }
      break;
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_for() {
    auto s = mks(StmtKind::For, cur());
    next();
    s->target = parse_assign_target({"in"}, false);
    if (!is_name("in")) unexpected("'in'");
    next();
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) {
      next();
      s->recursive = true;
    }
    expect_block_end();
    s->body = parse_body({"endfor", "else"});
    if (next().value == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"});
      next();
    }
    expect_block_end();
    return s;
  }

  // Names, tuples of names (optionally parenthesized), or ns.attr.
  Target parse_assign_target(std::initializer_list<const char*> end_names, bool with_namespace) {
    Target t;
    if (with_namespace && cur().type == TokType::Name && tok_is_op(peek(), ".")) {
      t.names.push_back(next().value);
      next();
      t.attr = expect_name();
      return t;
    }
    bool paren = false;
    if (is_op("(")) {
      next();
      paren = true;
      t.tuple = true;
    }
    while (true) {
      if (!t.names.empty()) {
        if (!is_op(",")) break;
        next();
        t.tuple = true;
      }
      if (cur().type == TokType::BlockEnd || is_op(")") || is_op("=")) break;
      bool at_end = false;
      for (const char* n : end_names)
        if (is_name(n)) at_end = true;
      if (at_end) break;
      if (cur().type != TokType::Name) error("can't assign to '" + describe_token(cur()) + "'");
      std::string nm = next().value;
      if (nm == "true" || nm == "false" || nm == "none" || nm == "True" || nm == "False" || nm == "None")
        error("can't assign to 'const'");
      t.names.push_back(nm);
    }
    if (paren) expect_op(")");
    if (t.names.empty()) error("expected an assignment target");
    return t;
  }

  StmtPtr parse_set() {
    const Token& at = cur();
    next();
    Target target = parse_assign_target({}, true);
    if (is_op("=")) {
      next();
      auto s = mks(StmtKind::Set, at);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      expect_block_end();
      return s;
    }
    auto s = mks(StmtKind::SetBlock, at);
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect_block_end();
    s->body = parse_body({"endset"});
    next();
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        next();
        p.default_value = parse_expression(true);
      } else if (!params.empty() && params.back().default_value) {
        error("non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    next();
  }

  StmtPtr parse_macro() {
    auto s = mks(StmtKind::Macro, cur());
    next();
    s->name = expect_name();
    parse_params(s->params);
    expect_block_end();
    s->body = parse_body({"endmacro"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = mks(StmtKind::CallBlock, cur());
    next();
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) error("expected call", cur());
    expect_block_end();
    s->body = parse_body({"endcall"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = mks(StmtKind::FilterBlock, cur());
    next();
    s->expr = parse_filter(nullptr, true);
    expect_block_end();
    s->body = parse_body({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = mks(StmtKind::With, cur());
    next();
    while (cur().type != TokType::BlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_assign_target({}, false);
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_body({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions ----
  bool is_tuple_end(std::initializer_list<const char*> extra) const {
    if (cur().type == TokType::VarEnd || cur().type == TokType::BlockEnd || cur().type == TokType::Eof ||
        is_op(")"))
      return true;
    for (const char* n : extra)
      if (is_name(n)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<const char*> extra,
                      bool explicit_parens) {
    const Token& at = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      if (simplified) items.push_back(parse_primary());
      else items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error("Expected an expression, got '" + describe_token(cur()) + "'");
    }
    auto e = mk(ExprKind::TupleLit, at);
    e->args = std::move(items);
    return fin(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e1 = parse_or();
    while (is_name("if")) {
      const Token& at = next();
      ExprPtr cond = parse_or();
      ExprPtr e3;
      if (is_name("else")) {
        next();
        e3 = parse_condexpr();
      }
      auto e = mk(ExprKind::CondExpr, at);
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(e1));
      e->args.push_back(std::move(e3));
      e1 = fin(std::move(e));
    }
    return e1;
  }

  ExprPtr binary(ExprKind k, const Token& at, ExprPtr l, ExprPtr r, std::string name = {}) {
    auto e = mk(k, at);
    e->name = std::move(name);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return fin(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const Token& at = next();
      l = binary(ExprKind::Or, at, std::move(l), parse_and());
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const Token& at = next();
      l = binary(ExprKind::And, at, std::move(l), parse_not());
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token& at = next();
      auto e = mk(ExprKind::Not, at);
      e->args.push_back(parse_not());
      return fin(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TokType::Op &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        op = next().value;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == TokType::Name && peek().value == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = mk(ExprKind::Compare, at);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? fin(std::move(cmp)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      l = binary(ExprKind::BinOp, at, std::move(l), parse_concat(), at.value);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const Token& at = next();
      l = binary(ExprKind::BinOp, at, std::move(l), parse_math2(), "~");
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      l = binary(ExprKind::BinOp, at, std::move(l), parse_pow(), at.value);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const Token& at = next();
      l = binary(ExprKind::BinOp, at, std::move(l), parse_unary(true), "**");
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      node = mk(at.value == "-" ? ExprKind::Neg : ExprKind::Pos, at);
      node->args.push_back(parse_unary(false));
      node = fin(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    ExprPtr e;
    switch (t.type) {
      case TokType::Name: {
        next();
        if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
          e = mk(ExprKind::Literal, t);
          e->literal = Value(t.value == "true" || t.value == "True");
        } else if (t.value == "none" || t.value == "None") {
          e = mk(ExprKind::Literal, t);
          e->literal = Value::none();
        } else {
          e = mk(ExprKind::Name, t);
          e->name = t.value;
        }
        return e;
      }
      case TokType::String: {
        std::string s = next().value;
        while (cur().type == TokType::String) s += next().value;
        e = mk(ExprKind::Literal, t);
        e->literal = Value(std::move(s));
        return e;
      }
      case TokType::Int:
        next();
        e = mk(ExprKind::Literal, t);
        e->literal = Value(t.ival);
        return e;
      case TokType::Float:
        next();
        e = mk(ExprKind::Literal, t);
        e->literal = Value(t.fval);
        return e;
      case TokType::Op:
        if (t.value == "(") {
          DepthGuard guard(*this);
          next();
          e = parse_tuple(false, true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") {
          DepthGuard guard(*this);
          next();
          e = mk(ExprKind::ListLit, t);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          next();
          return fin(std::move(e));
        }
        if (t.value == "{") {
          DepthGuard guard(*this);
          next();
          e = mk(ExprKind::DictLit, t);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          next();
          return fin(std::move(e));
        }
        break;
      default: break;
    }
    if (t.type == TokType::Eof) error("unexpected end of template");
    error("unexpected '" + describe_token(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) node = parse_filter(std::move(node), false);
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.value == ".") {
      const Token& a = next();
      if (a.type == TokType::Name) {
        auto e = mk(ExprKind::GetAttr, a);
        e->name = a.value;
        e->args.push_back(std::move(node));
        return fin(std::move(e));
      }
      if (a.type != TokType::Int) error("expected name or number", a);
      auto e = mk(ExprKind::GetItem, a);
      auto idx = mk(ExprKind::Literal, a);
      idx->literal = Value(a.ival);
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(idx));
      return fin(std::move(e));
    }
    // '['
    DepthGuard guard(*this);
    std::vector<ExprPtr> parts;  // subscripts (slice -> Slice node with null obj)
    while (!is_op("]")) {
      if (!parts.empty()) expect_op(",");
      parts.push_back(parse_subscribed());
    }
    next();
    if (parts.size() == 1 && parts[0]->kind == ExprKind::Slice) {
      parts[0]->args[0] = std::move(node);
      return fin(std::move(parts[0]));
    }
    auto e = mk(ExprKind::GetItem, t);
    e->args.push_back(std::move(node));
    if (parts.size() == 1) {
      e->args.push_back(std::move(parts[0]));
    } else {
      auto tup = mk(ExprKind::TupleLit, t);
      for (auto& p : parts) {
        if (p->kind == ExprKind::Slice) error("slices in tuple subscripts are not supported", t);
        tup->args.push_back(std::move(p));
      }
      e->args.push_back(fin(std::move(tup)));
    }
    return fin(std::move(e));
  }

  ExprPtr parse_subscribed() {
    const Token& at = cur();
    std::vector<ExprPtr> args;
    if (is_op(":")) {
      next();
      args.push_back(nullptr);
    } else {
      ExprPtr n = parse_expression(true);
      if (!is_op(":")) return n;
      next();
      args.push_back(std::move(n));
    }
    if (is_op(":")) args.push_back(nullptr);
    else if (!is_op("]") && !is_op(",")) args.push_back(parse_expression(true));
    else args.push_back(nullptr);
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) args.push_back(parse_expression(true));
      else args.push_back(nullptr);
    } else {
      args.push_back(nullptr);
    }
    auto e = mk(ExprKind::Slice, at);
    e->args.push_back(nullptr);  // object, filled in by parse_subscript
    for (auto& a : args) e->args.push_back(std::move(a));
    return e;
  }

  void parse_call_args(Expr& e) {
    const Token& open = cur();
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (cur().type == TokType::Eof) unexpected("')'");
      if (is_op("*")) {
        if (e.dyn_args || e.dyn_kwargs) error("invalid syntax for function call expression", open);
        next();
        e.dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        if (e.dyn_kwargs) error("invalid syntax for function call expression", open);
        next();
        e.dyn_kwargs = parse_expression(true);
      } else if (cur().type == TokType::Name && tok_is_op(peek(), "=")) {
        if (e.dyn_kwargs) error("invalid syntax for function call expression", open);
        std::string key = next().value;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty())
          error("invalid syntax for function call expression", open);
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    next();
  }

  ExprPtr parse_call(ExprPtr node) {
    DepthGuard guard(*this);
    auto e = mk(ExprKind::Call, cur());
    e->line = node->line;
    e->col = node->col;
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return fin(std::move(e));
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    DepthGuard guard(*this);
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& at = cur();
      std::string name = expect_name();
      while (is_op(".")) {
        next();
        name += "." + expect_name();
      }
      auto e = mk(ExprKind::Filter, at);
      e->name = std::move(name);
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = fin(std::move(e));
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    DepthGuard guard(*this);
    const Token& is_tok = next();
    bool negated = false;
    if (is_name("not")) {
      next();
      negated = true;
    }
    const Token& at = cur();
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    auto e = mk(ExprKind::Test, at);
    e->name = std::move(name);
    e->args.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == TokType::Name || cur().type == TokType::String || cur().type == TokType::Int ||
                cur().type == TokType::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    e = fin(std::move(e));
    if (!negated) return e;
    auto n = mk(ExprKind::Not, is_tok);
    n->args.push_back(std::move(e));
    return fin(std::move(n));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<Template> parse_template(const std::string& source, const LexOptions& opts) {
  return Parser(tokenize(source, opts)).run();
}

}  // namespace pc::jinja
