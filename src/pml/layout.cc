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
    if (enc_.bos() >= 0) emit(0, {enc_.bos()});
    body(doc_.body, 0);
    L_.length = pos_;
    L_.modules[0].length = pos_;
    finish();
    return std::move(L_);
  }

 private:
  // Appends tokens to module m's own tokens at the next positions.
  void emit(int m, const std::vector<int32_t>& toks) {
    ModuleLayout& mod = L_.modules[m];
    for (int32_t t : toks) {
      mod.tokens.push_back(t);
      mod.positions.push_back(pos_++);
    }
  }

  void body(const std::vector<Node>& nodes, int m) {
    for (const Node& n : nodes) node(n, m);
  }

  void node(const Node& n, int m) {
    switch (n.kind) {
      case Node::Kind::kText:
        emit(m, enc_.text(n.text));
        break;
      case Node::Kind::kRole: {
        const RoleMarker& r = enc_.markers()[n.role];
        if (n.children.empty()) {  // an empty tag opens a turn: <assistant/> → generation prompt
          emit(m, enc_.marker(n.role == Role::kAssistant ? enc_.markers().generation_prompt : r.prefix));
          break;
        }
        emit(m, enc_.marker(r.prefix));
        body(n.children, m);
        emit(m, enc_.marker(r.suffix));
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
        L_.unions.push_back({m, pos_, 0, {}, n.loc});
        const int32_t start = pos_;
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
    p.slot = pos_;
    p.length = n.length;
    p.placeholder = n.placeholder;
    p.loc = n.loc;
    p.begin = static_cast<int32_t>(L_.modules[m].tokens.size());
    emit(m, toks);
    p.end = static_cast<int32_t>(L_.modules[m].tokens.size());
    pos_ = p.slot + p.length;
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
    mod.start = pos_;
    mod.loc = n.loc;
    L_.modules.push_back(std::move(mod));
    L_.modules[parent].children.push_back(c);
    body(n.children, c);
    L_.modules[c].length = pos_ - L_.modules[c].start;
    return c;
  }

  void finish() {
    const uint64_t fp = enc_.fingerprint();
    Hasher schema;
    schema.str("pml-schema-v1").u64(fp).str(L_.name).i64(L_.length);
    for (size_t i = 0; i < L_.modules.size(); ++i) {
      ModuleLayout& m = L_.modules[i];
      Hasher h;
      h.str("pml-module-v1").u64(fp);
      for (int a : L_.chain(static_cast<int>(i))) {
        if (a == static_cast<int>(i)) break;
        const ModuleLayout& anc = L_.modules[a];
        const int32_t n = static_cast<int32_t>(
            std::lower_bound(anc.positions.begin(), anc.positions.end(), m.start) - anc.positions.begin());
        m.context.push_back({a, n});
        h.i64(n);
        for (int32_t k = 0; k < n; ++k) h.i64(anc.tokens[k]).i64(anc.positions[k]);
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

  const SchemaDoc& doc_;
  const Encoder& enc_;
  SourceMap map_;  // only for raising errors with the document's source name
  SchemaLayout L_;
  int32_t pos_ = 0;
};

}  // namespace

std::string SchemaLayout::digest_hex() const { return hex64(digest); }

int SchemaLayout::find(std::string_view path) const {
  for (size_t i = 0; i < modules.size(); ++i)
    if (modules[i].path == path) return static_cast<int>(i);
  return -1;
}

int SchemaLayout::child(int parent, std::string_view name) const {
  for (int c : modules[parent].children)
    if (modules[c].name == name) return c;
  return -1;
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
