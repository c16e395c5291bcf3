// The assembly plan: what a prompt's KV is made of, in attention order.
//
// Every prompt the engine runs — a plain request, a PML prompt, later a chat request
// whose parts moved — is described by one KvPlan: an ordered list of spans, each
// either KV to take from a cache or tokens to compute at given positions. The engine
// resolves a plan against its caches (engine/assembly.h) and runs the result on one
// path; where the plan came from is the caller's business.
//
//   span kind   what it is                                    resolved by
//   kPrefix     tokens from position 0 whose KV the prefix    the prefix cache: the
//               cache may hold (the longest cached part is    cached part is referenced,
//               referenced, the rest computed)                the rest computed
//   kModule     own tokens [begin, end) of a module (whole    the module cache: encoded
//               segments), K rotated by `shift` positions     once, referenced after
//   kCompute    tokens to compute at `positions`              the forward pass
//
// Computed tokens attend to everything before them in plan order. A module's KV
// attends only to its context and itself (ModuleSpec::context), whatever comes before
// it in the plan — which is why a module's KV can be reused in any combination.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pc {

// A module the engine can encode, cache and reuse: its own tokens at their positions,
// what they attend to, and its cache policy. Equal digests mean equal KV (for one
// model and KV type), so the digest is the module cache's key.
struct ModuleSpec {
  struct Context {
    int32_t module = 0;    // index into the same ModuleSet
    int32_t n_tokens = 0;  // the first n_tokens of that module's own tokens
  };
  std::string path;                // for listings ("doc/chapter1"; "" = a schema's root text)
  std::string schema;              // the schema it belongs to (listings, drop by schema)
  uint64_t digest = 0;             // content, context and positions
  std::vector<int32_t> tokens;     // own tokens
  std::vector<int32_t> positions;  // tokens[i] is encoded at positions[i] (strictly increasing)
  // Segment boundaries 0 = cuts[0] < cuts[1] < ... < cuts.back() = tokens.size(). Each
  // segment starts on a fresh page, so a plan can take or skip any segment (a filled
  // parameter's placeholder) and reference the pages as they are.
  std::vector<int32_t> cuts;
  std::vector<Context> context;    // outermost first; all before tokens[0] in attention order
  bool cache = true;               // false: encoded for each request, never stored
  bool pin = false;                // never evicted
  double ttl_seconds = 0;          // > 0: dropped this long after it was stored
  int32_t n_segments() const { return int32_t(cuts.size()) - 1; }
};
using ModuleSet = std::vector<ModuleSpec>;

struct KvSpan {
  enum class Kind { kPrefix, kModule, kCompute };
  Kind kind = Kind::kCompute;
  // kPrefix, kCompute: the tokens and their positions (kPrefix: 0, 1, 2, ...).
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  // kModule: own tokens [begin, end) of modules[module], cut at segment boundaries;
  // their KV was computed at the module's positions and is used `shift` positions
  // later (K rotated by RoPE when shift != 0).
  int32_t module = -1;
  int32_t begin = 0, end = 0;
  int32_t shift = 0;
  int32_t n_tokens() const { return kind == Kind::kModule ? end - begin : int32_t(tokens.size()); }
};

// Tokens [begin, end) of the plan (in attention order) that are one part of the request
// — a tool definition, a message — whose KV the engine indexes by content
// (engine/approximate/block_index.h), so it can be found later at whatever position it sat.
struct KvBlock {
  int32_t begin = 0, end = 0;
};

struct KvPlan {
  std::shared_ptr<const ModuleSet> modules;  // what kModule spans refer to (null: none)
  std::vector<KvSpan> spans;
  std::vector<KvBlock> blocks;               // in order, not overlapping (optional)

  // A plain prompt: one kPrefix span over tokens at positions 0..n-1.
  static KvPlan prompt(const std::vector<int32_t>& tokens);
  int64_t n_tokens() const;
  // True when the plan is a token sequence from position 0 with nothing but prefix and
  // computed spans at consecutive positions: its KV is a prefix the prefix cache can
  // index once the sequence finishes.
  bool is_prefix() const;
};

}  // namespace pc
