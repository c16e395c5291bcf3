#include "pml/layout.h"

#include <algorithm>

#include "pml/encoder.h"
#include "pml/hash.h"

namespace pc::pml {

namespace {

class Layouter {
 public:
  Layouter(const SchemaDoc& doc, const Encoder& enc) : doc_(doc), enc_(enc), map_("", doc.source) {}

  SchemaLayout run() {
    L_.name = doc_.name;
    L_.source = doc_.source;
    ModuleLayout root;
    root.loc = doc_.loc;
    L_.modules.push_back(std::move(root));
    L_.by_path.emplace("", 0);
    if (enc_.bos() >= 0) emit(0, {enc_.bos()}, doc_.loc);
    body(doc_.body, 0);
    L_.length = int32_t(pos_);
    L_.modules[0].length = int32_t(pos_);
    finish();
    return std::move(L_);
  }

 private:
  // Moves the next position to pos_ + n, failing at `loc` (naming `what`) when the
  // schema would pass kMaxSchemaPositions: positions are int32 in the layout, the plan
  // and the engine, so their sums are checked here, in 64 bits, once.
  void advance(int64_t n, Loc loc, const std::string& what) {
    if (pos_ + n > kMaxSchemaPositions)
      map_.fail(loc, what + " takes the schema past " + std::to_string(kMaxSchemaPositions) +
                         " positions (it would end at position " + std::to_string(pos_ + n) + ")");
    pos_ += n;
  }

  // Appends tokens to module m's own tokens at the next positions.
  void emit(int m, const std::vector<int32_t>& toks, Loc loc) {
    ModuleLayout& mod = L_.modules[m];
    const int32_t first = int32_t(pos_);
    advance(int64_t(toks.size()), loc, "text");
    for (size_t i = 0; i < toks.size(); ++i) {
      mod.tokens.push_back(toks[i]);
      mod.positions.push_back(first + int32_t(i));
    }
  }

  void body(const std::vector<Node>& nodes, int m) {
    for (const Node& n : nodes) node(n, m);
  }

  void node(const Node& n, int m) {
    switch (n.kind) {
      case Node::Kind::kText:
        emit(m, enc_.text(n.text), n.loc);
        break;
      case Node::Kind::kRole: {
        const RoleMarker& r = enc_.markers()[n.role];
        if (n.children.empty()) {  // an empty tag opens a turn: <assistant/> → generation prompt
          emit(m, enc_.marker(n.role == Role::kAssistant ? enc_.markers().generation_prompt : r.prefix), n.loc);
          break;
        }
        emit(m, enc_.marker(r.prefix), n.loc);
        body(n.children, m);
        emit(m, enc_.marker(r.suffix), n.loc);
        break;
      }
      case Node::Kind::kParam:
        param(n, m);
        break;
      case Node::Kind::kModule:
        module(n, m, -1);
        break;
      case Node::Kind::kUnion: {
        const int u = static_cast<int>(L_.unions.size());
        const int32_t start = int32_t(pos_);
        L_.unions.push_back({m, start, 0, {}, n.loc});
        int32_t longest = 0;
        for (const Node& member : n.children) {
          pos_ = start;
          const int c = module(member, m, u);
          L_.unions[u].members.push_back(c);
          longest = std::max(longest, L_.modules[c].length);
        }
        L_.unions[u].length = longest;
        pos_ = start + longest;
        break;
      }
      case Node::Kind::kImport:
        break;  // not in schemas
    }
  }

  void param(const Node& n, int m) {
    const std::vector<int32_t> toks = enc_.text(n.placeholder);
    if (static_cast<int64_t>(toks.size()) > n.length)
      map_.fail(n.loc, "placeholder of parameter '" + n.name + "' is " + std::to_string(toks.size()) +
                           " tokens; its slot holds " + std::to_string(n.length));
    Param p;
    p.name = n.name;
    p.slot = int32_t(pos_);
    p.length = n.length;
    p.placeholder = n.placeholder;
    p.loc = n.loc;
    p.begin = static_cast<int32_t>(L_.modules[m].tokens.size());
    emit(m, toks, n.loc);  // toks.size() <= length
    p.end = static_cast<int32_t>(L_.modules[m].tokens.size());
    pos_ = p.slot;
    advance(n.length, n.loc, "parameter '" + n.name + "' (length " + std::to_string(n.length) + ")");
    L_.modules[m].params.push_back(std::move(p));
  }

  int module(const Node& n, int parent, int union_index) {
    const int c = static_cast<int>(L_.modules.size());
    ModuleLayout mod;
    mod.name = n.name;
    mod.path = parent == 0 ? n.name : L_.modules[parent].path + "/" + n.name;
    mod.parent = parent;
    mod.union_index = union_index;
    mod.cache = n.cache;
    mod.pin = n.pin;
    mod.ttl_seconds = n.ttl_seconds;
    mod.start = int32_t(pos_);
    mod.loc = n.loc;
    L_.by_path.emplace(mod.path, c);
    L_.modules.push_back(std::move(mod));
    L_.modules[parent].children.push_back(c);
    body(n.children, c);
    L_.modules[c].length = int32_t(pos_) - L_.modules[c].start;
    return c;
  }

  void finish() {
    const uint64_t fp = enc_.fingerprint();
    Hasher schema;
    schema.str("pml-schema-v1").u64(fp).str(L_.name).i64(L_.length);
    for (size_t i = 0; i < L_.modules.size(); ++i) {
      ModuleLayout& m = L_.modules[i];
      Hasher h;
      h.str("pml-module-v2").u64(fp);
      for (int a : L_.chain(static_cast<int>(i))) {
        if (a == static_cast<int>(i)) break;
        const ModuleLayout& anc = L_.modules[a];
        const int32_t n = static_cast<int32_t>(
            std::lower_bound(anc.positions.begin(), anc.positions.end(), m.start) - anc.positions.begin());
        m.context.push_back({a, n});
        h.i64(n).u64(prefix_digest(a, n));
      }
      h.ids(m.tokens).ids(m.positions).i64(m.start).i64(m.length);
      for (const Param& p : m.params) h.i64(p.slot).i64(p.length).i64(p.begin).i64(p.end);
      m.digest = h.digest();

      schema.str(m.path).i64(m.parent).i64(m.union_index).i64(m.cache).u64(m.digest);
      for (const Param& p : m.params) schema.str(p.name).str(p.placeholder);
    }
    for (const UnionLayout& u : L_.unions) {
      schema.i64(u.parent).i64(u.start).i64(u.length);
      for (int x : u.members) schema.i64(x);
    }
    L_.digest = schema.digest();
  }

  // Digest of module m's first n own (token, position) pairs, chained one pair at a
  // time so that every prefix costs O(1) once the module's chain is built: each
  // module hashes its ancestors' tokens before it, and hashing them anew per module
  // would make a schema of many modules in long root text quadratic.
  uint64_t prefix_digest(int m, int32_t n) {
    if (prefix_.size() < L_.modules.size()) prefix_.resize(L_.modules.size());
    std::vector<uint64_t>& chain = prefix_[m];
    if (chain.empty()) {
      const ModuleLayout& mod = L_.modules[m];
      chain.reserve(mod.tokens.size() + 1);
      chain.push_back(0x706d6c2d63747821ull);  // "pml-ctx!": the empty prefix
      for (size_t k = 0; k < mod.tokens.size(); ++k) {
        Hasher pair;
        pair.i64(mod.tokens[k]).i64(mod.positions[k]).u64(chain.back());
        chain.push_back(pair.digest());
      }
    }
    return chain[n];
  }

  const SchemaDoc& doc_;
  const Encoder& enc_;
  SourceMap map_;  // only for raising errors with the document's source name
  SchemaLayout L_;
  std::vector<std::vector<uint64_t>> prefix_;  // per module: prefix_digest's chain (built on use)
  int64_t pos_ = 0;  // the next position; at most kMaxSchemaPositions (advance)
};

}  // namespace

std::string SchemaLayout::digest_hex() const { return hex64(digest); }

int SchemaLayout::find(std::string_view path) const {
  const auto it = by_path.find(std::string(path));
  return it == by_path.end() ? -1 : it->second;
}

int SchemaLayout::child(int parent, std::string_view name) const {
  if (parent == 0) return find(name);
  std::string path = modules[parent].path;
  path.append("/").append(name);
  return find(path);
}

std::vector<int> SchemaLayout::chain(int m) const {
  std::vector<int> out;
  for (int x = m; x >= 0; x = modules[x].parent) out.push_back(x);
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<TokenRun> token_runs(const ModuleLayout& m) {
  std::vector<TokenRun> runs;
  for (int32_t i = 0; i < static_cast<int32_t>(m.tokens.size()); ++i) {
    if (runs.empty() || m.positions[i] != m.positions[i - 1] + 1) runs.push_back({i, i, m.positions[i]});
    runs.back().end = i + 1;
  }
  return runs;
}

SchemaLayout layout_schema(const SchemaDoc& doc, const Encoder& enc) { return Layouter(doc, enc).run(); }

SchemaLayout compile_schema(std::string_view text, const Encoder& enc, std::string_view source) {
  return layout_schema(parse_schema(text, source), enc);
}

}  // namespace pc::pml
