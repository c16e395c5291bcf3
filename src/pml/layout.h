// A schema laid out for one model: every module's tokens and positions, what it
// attends to when encoded, its parameter slots. The engine encodes modules from
// this and the module store keys entries by (digest, path, ...).
//
// Positions are assigned in document order from 0 (docs/pml.md "Layout"):
//
//   <schema>  BOS  root text   <module a>   root text   <union>           <module c>
//   pos       0    1 ...       [a.start,     ...         [u.start,         ...
//                              a.start+len)              u.start+max len)
//                                                         members m1, m2 both start at u.start
//
// A module occupies [start, start + length): its own tokens plus its child
// modules' ranges (and unused slot positions). A parameter reserves `length`
// positions starting at `slot`; its placeholder's tokens take the first ones,
// the rest are left empty (no tokens; a gap in the positions).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pml/document.h"

namespace pc::pml {

class Encoder;

struct Param {
  std::string name;
  int32_t slot = 0;         // first reserved position
  int32_t length = 0;       // reserved positions [slot, slot + length)
  std::string placeholder;  // text encoded in the slot when no argument is given
  // Placeholder tokens: module.tokens[begin, end), at positions slot, slot+1, ...
  int32_t begin = 0, end = 0;
  Loc loc;
};

// The first n_tokens of module `module`'s own tokens.
struct ContextRef {
  int module = 0;
  int32_t n_tokens = 0;
};

struct ModuleLayout {
  std::string name;   // "" for the root
  std::string path;   // "doc/chapter1"; "" for the root
  int parent = -1;    // index into SchemaLayout::modules; -1 for the root
  std::vector<int> children;  // direct child modules (union members included), document order
  int union_index = -1;       // index into SchemaLayout::unions when a union member, else -1
  bool cache = true;          // false: cache="false", computed in every request
  bool pin = false;           // pin="true": the module store never evicts its KV
  double ttl_seconds = 0;     // ttl="S": dropped from the module store S s after encoding
  int32_t start = 0;          // occupies positions [start, start + length)
  int32_t length = 0;
  // Own tokens (not the children's), in position order; positions strictly
  // increase but may jump (child modules, unused slot positions):
  //   tokens[i] is encoded at positions[i].
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<Param> params;
  // What the module attends to besides its own tokens, outermost first: for each
  // ancestor (root first), how many of its own tokens lie before `start`. A
  // module's KV is its tokens computed over context + its own tokens in order.
  std::vector<ContextRef> context;
  // Content hash: encoder fingerprint, context tokens and positions, own tokens,
  // positions and slots. Equal digests ⇒ equal KV (for one model and KV type).
  uint64_t digest = 0;
  Loc loc;  // the <module> element; the <schema> element for the root
};

struct UnionLayout {
  int parent = 0;           // the module whose text the union sits in
  int32_t start = 0;        // every member starts here
  int32_t length = 0;       // the longest member's length
  std::vector<int> members;
  Loc loc;
};

// A run of consecutive own tokens at consecutive positions.
struct TokenRun {
  int32_t begin = 0, end = 0;  // indices into ModuleLayout::tokens
  int32_t pos = 0;             // position of tokens[begin]
};

// A schema's positions end at most here (docs/pml.md "Limits"); text and parameter
// lengths that would pass it are a PmlError naming the element.
inline constexpr int64_t kMaxSchemaPositions = int64_t(1) << 30;

struct SchemaLayout {
  std::string name;
  std::string source;   // file name used in messages
  // Pre-order (document order); modules[0] is the root, the anonymous module of
  // the text outside modules, included in every prompt.
  std::vector<ModuleLayout> modules;
  std::vector<UnionLayout> unions;
  std::unordered_map<std::string, int> by_path;  // module path → index (the root: "")
  int32_t length = 0;   // positions [0, length) are the schema's
  // Stable hash of the canonical schema (every module's path, structure, flags,
  // slots, tokens and positions) and the encoder fingerprint (tokenizer
  // identity, role markers). Part of module store keys.
  uint64_t digest = 0;
  std::string digest_hex() const;

  const ModuleLayout& root() const { return modules[0]; }
  int find(std::string_view path) const;             // module index by path; -1 if none
  int child(int parent, std::string_view name) const;  // child module by name; -1 if none
  // Every module on the way from the root to `m`, root first, `m` last.
  std::vector<int> chain(int m) const;
};

std::vector<TokenRun> token_runs(const ModuleLayout& m);

// Tokenizes and positions a parsed schema. Throws PmlError (a placeholder longer
// than its slot).
SchemaLayout layout_schema(const SchemaDoc& doc, const Encoder& enc);
// parse_schema + layout_schema.
SchemaLayout compile_schema(std::string_view text, const Encoder& enc, std::string_view source = "");

}  // namespace pc::pml
