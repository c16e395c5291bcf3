// Syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace pc::jinja {

enum class ExprKind {
  Literal,    // literal
  Name,       // name
  GetAttr,    // args[0].name
  GetItem,    // args[0][args[1]]
  Slice,      // args[0][args[1]:args[2]:args[3]] (null parts allowed)
  Call,       // args[0](args[1..], kwargs, dyn_args, dyn_kwargs)
  Filter,     // args[0] | name(args[1..], kwargs); args[0] null in filter blocks
  Test,       // args[0] is name(args[1..], kwargs)
  Not,        // not args[0]
  Neg,        // -args[0]
  Pos,        // +args[0]
  BinOp,      // args[0] <name> args[1]; name in + - * / // % ** ~
  Compare,    // args[0] ops[0] args[1] ops[1] args[2] ...
  And,        // args[0] and args[1]
  Or,         // args[0] or args[1]
  CondExpr,   // args[1] if args[0] else args[2] (args[2] may be null)
  ListLit,    // [args...]
  TupleLit,   // (args...)
  DictLit,    // {args[0]: args[1], args[2]: args[3], ...}
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  int line = 0;
  int col = 0;
  int depth = 1;  // height of this subtree (bounded by the parser)
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;
  ExprPtr dyn_kwargs;
  std::vector<std::string> ops;
};

// Assignment target: `x`, `a, b` or `ns.attr`.
struct Target {
  std::vector<std::string> names;
  bool tuple = false;
  std::string attr;  // non-empty: namespace attribute assignment names[0].attr
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class StmtKind {
  Text,         // text
  Output,       // {{ expr }}
  If,           // branches: (cond, body), cond null for else
  For,          // for target in expr [if cond] [recursive]: body [else else_body]
  Set,          // set target = expr
  SetBlock,     // set target %}body{% endset; filter (may be null) applied
  Macro,        // macro name(params): body
  CallBlock,    // call(params) expr: body
  FilterBlock,  // filter <filter chain in expr>: body
  With,         // with assigns: body
  Break,
  Continue,
  Scope,        // plain body (generation blocks)
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int col = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  Target target;
  StmtList body;
  StmtList else_body;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  bool recursive = false;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<Target, ExprPtr>> assigns;  // with
};

struct Template {
  StmtList body;
};

}  // namespace pc::jinja
