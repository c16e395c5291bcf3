// A context-free grammar over bytes: what constrained decoding enforces.
//
// GBNF text (gbnf_parser.h) and JSON Schemas (json_schema.h) both compile to this
// one form. Characters of the source are Unicode code points; they are lowered to
// UTF-8 byte sequences here, so the matcher (matcher.h) works on the bytes of
// tokens and a token that ends inside a multi-byte character is handled like any
// other prefix.
//
//   elems   [ alt 0 of rule 0 ..., kEnd | alt 1 of rule 0 ..., kEnd | alt 0 of rule 1 ... ]
//   alts    alts[r] = start index in elems of each alternative of rule r
//   sets    byte sets (256 bits) that kBytes elements index
//
// A built grammar has been checked (Grammar::check): every rule is defined, none is
// left-recursive (a rule reaching itself before consuming a byte, which would make
// expansion loop), and every rule reachable from the root derives some finite byte
// string, so every state the matcher can reach can still finish.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace pc::grammar {

// Bad grammar or schema text. `param` is where in the request's value the problem
// is (e.g. "schema.properties.age.pattern"; empty: the value itself); the message
// names the rule or keyword.
class GrammarError : public Error {
 public:
  explicit GrammarError(const std::string& what, std::string param = "")
      : Error(what), param(std::move(param)) {}
  std::string param;
};

using ByteSet = std::array<uint64_t, 4>;

inline bool has_byte(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

struct Grammar {
  enum class Op : uint8_t { kBytes, kRule, kEnd };
  struct Elem {
    Op op;
    int32_t arg;  // kBytes: index into sets; kRule: rule id; kEnd: the rule it ends
  };
  std::vector<Elem> elems;
  std::vector<std::vector<int32_t>> alts;  // [rule] → start of each alternative in elems
  std::vector<std::string> names;          // [rule]
  std::vector<ByteSet> sets;
  int32_t root = -1;
  std::string source;  // the text it was built from (GBNF), a cache key

  int32_t n_rules() const { return int32_t(alts.size()); }
};

// Builds a Grammar rule by rule. Rules are referred to by id before they are
// defined; build() checks that all are.
class GrammarBuilder {
 public:
  int32_t rule(const std::string& name);  // id of a named rule (created undefined)
  int32_t fresh_rule(std::string base);  // a new rule, named base-N
  // One alternative of a rule: a sequence of symbols.
  struct Symbol {
    bool is_rule = false;
    int32_t rule = -1;   // is_rule
    ByteSet bytes{};     // !is_rule
  };
  void add_alt(int32_t rule, const std::vector<Symbol>& seq);
  void mark_defined(int32_t rule) { defined_[rule] = true; }
  bool defined(int32_t rule) const { return defined_[rule]; }
  const std::string& name(int32_t rule) const { return names_[rule]; }
  // Checks and returns the grammar; throws GrammarError (undefined rule, left
  // recursion, a rule that can never finish, no root).
  std::shared_ptr<const Grammar> build(int32_t root, std::string source);

 private:
  int32_t set_id(const ByteSet& s);
  std::vector<std::string> names_;
  std::unordered_map<std::string, int32_t> ids_;  // named rules by name
  std::vector<bool> defined_;
  std::vector<std::vector<std::vector<Grammar::Elem>>> alts_;  // [rule][alt] elements
  std::vector<ByteSet> sets_;
  int32_t fresh_ = 0;
};

// Checks a grammar (see the header comment); throws GrammarError.
void check(const Grammar& g);

}  // namespace pc::grammar
