// PML → syntax tree: XML through pugixml, then PML's element rules.
#include "pml/document.h"

#include <charconv>
#include <cstdlib>
#include <map>
#include <pugixml.hpp>

namespace pc::pml {

const char* role_name(Role r) {
  switch (r) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool all_space(std::string_view s) {
  for (char c : s)
    if (!is_space(c)) return false;
  return true;
}

bool role_of(std::string_view tag, Role* r) {
  if (tag == "system") *r = Role::kSystem;
  else if (tag == "user") *r = Role::kUser;
  else if (tag == "assistant") *r = Role::kAssistant;
  else return false;
  return true;
}

bool is_reserved(std::string_view name) {
  static const char* const kReserved[] = {"schema", "prompt", "module", "union", "parameter",
                                          "param", "system", "user", "assistant"};
  for (const char* r : kReserved)
    if (name == r) return true;
  return false;
}

// Module and parameter names: what can be an XML element / attribute name and
// a path component. ASCII letters, digits, '_', '-', '.', non-ASCII characters;
// not starting with a digit, '-' or '.'.
bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
    const bool other = (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!(alpha || (i > 0 && other))) return false;
  }
  return true;
}

// The parsed XML and where its pieces are in the source text.
class Xml {
 public:
  Xml(std::string_view text, std::string_view source) : map_(text, std::string(source)) {
    const pugi::xml_parse_result r =
        doc_.load_buffer(text.data(), text.size(), pugi::parse_default | pugi::parse_ws_pcdata | pugi::parse_fragment,
                         pugi::encoding_utf8);
    if (!r) map_.fail_at(r.offset, std::string("malformed XML: ") + r.description());
    check_depth();
  }

  // The single top-level element, which must be named `tag`.
  pugi::xml_node root(const char* tag) const {
    pugi::xml_node root;
    for (pugi::xml_node n : doc_.children()) {
      if (n.type() == pugi::node_element) {
        if (root)
          fail(n, std::string("a document holds one <") + tag + "> element; found a second element <" +
                      n.name() + ">");
        root = n;
      } else if ((n.type() == pugi::node_pcdata || n.type() == pugi::node_cdata) &&
                 !all_space(n.value())) {
        fail(n, std::string("text outside the <") + tag + "> element");
      }
    }
    if (!root) map_.fail({1, 1}, std::string("no <") + tag + "> element");
    if (std::string_view(root.name()) != tag)
      fail(root, std::string("expected a <") + tag + "> element, found <" + root.name() + ">");
    return root;
  }

  // Elements: the '<'. Text: its first non-space character.
  Loc loc(pugi::xml_node n) const {
    ptrdiff_t off = n.offset_debug();
    if (n.type() == pugi::node_element && off > 0) return map_.at(off - 1);
    if (n.type() == pugi::node_pcdata && off >= 0) {
      const std::string_view t = map_.text();
      while (static_cast<size_t>(off) < t.size() && is_space(t[off])) ++off;
    }
    return map_.at(off);
  }

  // Location of attribute `name` in element `n`'s start tag, found by scanning
  // the tag (pugixml keeps no offsets for attributes). Falls back to the element.
  Loc loc(pugi::xml_node n, std::string_view name) const {
    const std::string_view t = map_.text();
    ptrdiff_t i = n.offset_debug();
    if (i < 0) return loc(n);
    size_t p = static_cast<size_t>(i);
    while (p < t.size() && !is_space(t[p]) && t[p] != '>' && t[p] != '/') ++p;  // element name
    while (p < t.size()) {
      while (p < t.size() && is_space(t[p])) ++p;
      if (p >= t.size() || t[p] == '>' || t[p] == '/') break;
      const size_t start = p;
      while (p < t.size() && !is_space(t[p]) && t[p] != '=') ++p;
      if (t.substr(start, p - start) == name) return map_.at(static_cast<ptrdiff_t>(start));
      while (p < t.size() && t[p] != '"' && t[p] != '\'') ++p;  // to the value's quote
      if (p >= t.size()) break;
      const char q = t[p++];
      while (p < t.size() && t[p] != q) ++p;
      ++p;
    }
    return loc(n);
  }

  [[noreturn]] void fail(pugi::xml_node n, const std::string& msg) const { map_.fail(loc(n), msg); }
  [[noreturn]] void fail(pugi::xml_node n, std::string_view attr, const std::string& msg) const {
    map_.fail(loc(n, attr), msg);
  }

  // Rejects attributes not in `allowed` and attributes given twice.
  void check_attributes(pugi::xml_node n, std::initializer_list<std::string_view> allowed) const {
    std::map<std::string_view, int> seen;
    for (pugi::xml_attribute a : n.attributes()) {
      const std::string_view an = a.name();
      if (seen[an]++) fail(n, an, "attribute '" + std::string(an) + "' given twice");
      bool ok = false;
      for (std::string_view x : allowed) ok = ok || x == an;
      if (!ok) {
        std::string list;
        for (std::string_view x : allowed) list += (list.empty() ? "" : ", ") + std::string(x);
        fail(n, an,
             "unknown attribute '" + std::string(an) + "' on <" + n.name() + ">" +
                 (list.empty() ? " (it takes none)" : " (it takes: " + list + ")"));
      }
    }
  }

  const SourceMap& map() const { return map_; }

 private:
  // Fails at the first element nested deeper than kMaxNesting. pugixml parses without
  // recursion; the walks after it (parsing, layout, planning) recurse once per level,
  // so the depth is bounded here, walking the tree without recursion.
  void check_depth() const {
    int depth = 1;  // of n: the document's own children are at depth 1
    pugi::xml_node n = doc_.first_child();
    while (n) {
      if (n.type() == pugi::node_element && depth > kMaxNesting)
        fail(n, "elements nest more than " + std::to_string(kMaxNesting) + " levels deep (<" +
                    std::string(n.name()) + "> is at level " + std::to_string(depth) + ")");
      if (pugi::xml_node c = n.first_child()) {
        n = c;
        ++depth;
        continue;
      }
      while (n != doc_ && !n.next_sibling()) {
        n = n.parent();
        --depth;
      }
      if (n == doc_) break;
      n = n.next_sibling();
    }
  }

  SourceMap map_;
  pugi::xml_document doc_;
};

// Builds the children of one block element, applying the whitespace rules:
// text and parameters accumulate into the current segment; a block child (or
// the end) closes it, trimming its ends.
class BlockBuilder {
 public:
  explicit BlockBuilder(std::vector<Node>& out) : out_(out), seg_begin_(out.size()) {}

  void text(std::string_view s, Loc loc) {
    if (out_.size() > seg_begin_ && out_.back().kind == Node::Kind::kText) {
      out_.back().text.append(s);
      return;
    }
    Node n;
    n.kind = Node::Kind::kText;
    n.loc = loc;
    n.text = std::string(s);
    out_.push_back(std::move(n));
  }
  void inline_node(Node n) { out_.push_back(std::move(n)); }
  void block(Node n) {
    close_segment();
    out_.push_back(std::move(n));
    seg_begin_ = out_.size();
  }
  void finish() { close_segment(); }

 private:
  void close_segment() {
    if (out_.size() > seg_begin_) {
      Node& first = out_[seg_begin_];
      if (first.kind == Node::Kind::kText) {
        size_t k = 0;
        while (k < first.text.size() && is_space(first.text[k])) ++k;
        first.text.erase(0, k);
      }
      Node& last = out_.back();
      if (last.kind == Node::Kind::kText) {
        size_t k = last.text.size();
        while (k > 0 && is_space(last.text[k - 1])) --k;
        last.text.resize(k);
      }
      size_t w = seg_begin_;
      for (size_t r = seg_begin_; r < out_.size(); ++r)
        if (!(out_[r].kind == Node::Kind::kText && out_[r].text.empty())) {
          if (w != r) out_[w] = std::move(out_[r]);
          ++w;
        }
      out_.resize(w);
    }
    seg_begin_ = out_.size();
  }

  std::vector<Node>& out_;
  size_t seg_begin_;
};

// ---------------------------------------------------------------- schema

class SchemaParser {
 public:
  explicit SchemaParser(const Xml& xml) : xml_(xml) {}

  // Children of a block element. `in_module`: inside a <module> (parameters
  // allowed); `in_role`: inside a role tag; `scope`: module names already used
  // in the enclosing module; `params`: parameter names of the enclosing module.
  struct Ctx {
    bool in_module = false;
    bool in_role = false;
    std::map<std::string, Loc>* scope = nullptr;
    std::map<std::string, Loc>* params = nullptr;
  };

  void body(pugi::xml_node parent, const Ctx& ctx, std::vector<Node>& out) {
    BlockBuilder b(out);
    for (pugi::xml_node c : parent.children()) {
      switch (c.type()) {
        case pugi::node_pcdata:
        case pugi::node_cdata:
          b.text(c.value(), xml_.loc(c));
          break;
        case pugi::node_element:
          element(c, ctx, b);
          break;
        default:
          break;  // comments, processing instructions
      }
    }
    b.finish();
  }

 private:
  void element(pugi::xml_node e, const Ctx& ctx, BlockBuilder& b) {
    const std::string_view tag = e.name();
    Role role;
    if (tag == "module") {
      b.block(module(e, ctx));
    } else if (tag == "union") {
      b.block(union_(e, ctx));
    } else if (tag == "parameter" || tag == "param") {
      b.inline_node(parameter(e, ctx));
    } else if (role_of(tag, &role)) {
      xml_.check_attributes(e, {});
      if (ctx.in_role) xml_.fail(e, "role tag <" + std::string(tag) + "> inside another role tag");
      Node n;
      n.kind = Node::Kind::kRole;
      n.loc = xml_.loc(e);
      n.role = role;
      Ctx inner = ctx;
      inner.in_role = true;
      body(e, inner, n.children);
      b.block(std::move(n));
    } else if (tag == "schema" || tag == "prompt") {
      xml_.fail(e, "<" + std::string(tag) + "> cannot appear inside a schema");
    } else {
      xml_.fail(e, "unknown element <" + std::string(tag) +
                       "> in a schema (expected module, union, parameter, system, user or assistant)");
    }
  }

  // name="..." of a module or parameter, checked for presence and form.
  std::string required_name(pugi::xml_node e) {
    pugi::xml_attribute a = e.attribute("name");
    if (!a) xml_.fail(e, "<" + std::string(e.name()) + "> needs a name attribute");
    std::string name = a.value();
    if (!valid_name(name))
      xml_.fail(e, "name", "invalid name '" + name +
                               "': use letters, digits, '_', '-' and '.', not starting with a digit, "
                               "'-' or '.'");
    return name;
  }

  Node module(pugi::xml_node e, const Ctx& ctx) {
    xml_.check_attributes(e, {"name", "cache", "pin", "ttl"});
    Node n;
    n.kind = Node::Kind::kModule;
    n.loc = xml_.loc(e);
    n.name = required_name(e);
    if (is_reserved(n.name))
      xml_.fail(e, "name", "module name '" + n.name + "' is reserved (it is a PML element)");
    auto [it, fresh] = ctx.scope->emplace(n.name, n.loc);
    if (!fresh)
      xml_.fail(e, "name", "duplicate module name '" + n.name + "' (first declared at " +
                               describe_loc(it->second) + ")");
    if (pugi::xml_attribute c = e.attribute("cache")) {
      const std::string_view v = c.value();
      if (v == "false") n.cache = false;
      else if (v != "true")
        xml_.fail(e, "cache", "cache must be \"true\" or \"false\", not \"" + std::string(v) + "\"");
    }
    if (pugi::xml_attribute p = e.attribute("pin")) {
      const std::string_view v = p.value();
      if (v == "true") n.pin = true;
      else if (v != "false")
        xml_.fail(e, "pin", "pin must be \"true\" or \"false\", not \"" + std::string(v) + "\"");
      if (n.pin && !n.cache) xml_.fail(e, "pin", "a module with cache=\"false\" is never stored, so it cannot be pinned");
    }
    if (pugi::xml_attribute t = e.attribute("ttl")) {
      const std::string v = t.value();
      char* end = nullptr;
      const double s = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(s > 0) || s > 1e9)
        xml_.fail(e, "ttl", "ttl must be a positive number of seconds, not \"" + v + "\"");
      if (!n.cache) xml_.fail(e, "ttl", "a module with cache=\"false\" is never stored, so it cannot have a ttl");
      n.ttl_seconds = s;
    }
    std::map<std::string, Loc> scope, params;
    Ctx inner{true, ctx.in_role, &scope, &params};
    body(e, inner, n.children);
    return n;
  }

  Node union_(pugi::xml_node e, const Ctx& ctx) {
    xml_.check_attributes(e, {"scaffold"});  // scaffold: accepted, members are always encoded alone
    Node n;
    n.kind = Node::Kind::kUnion;
    n.loc = xml_.loc(e);
    for (pugi::xml_node c : e.children()) {
      if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
        if (!all_space(c.value())) xml_.fail(c, "text inside <union> must be inside one of its <module>s");
      } else if (c.type() == pugi::node_element) {
        if (std::string_view(c.name()) != "module")
          xml_.fail(c, "<union> holds only <module> elements, not <" + std::string(c.name()) + ">");
        n.children.push_back(module(c, ctx));  // members share the enclosing module's name scope
      }
    }
    if (n.children.empty()) xml_.fail(e, "empty <union>: it needs at least one <module>");
    return n;
  }

  Node parameter(pugi::xml_node e, const Ctx& ctx) {
    xml_.check_attributes(e, {"name", "length", "len", "placeholder"});
    Node n;
    n.kind = Node::Kind::kParam;
    n.loc = xml_.loc(e);
    const std::string tag = e.name();
    if (!ctx.in_module) xml_.fail(e, "<" + tag + "> outside a module: parameters belong to a <module>");
    n.name = required_name(e);
    auto [it, fresh] = ctx.params->emplace(n.name, n.loc);
    if (!fresh)
      xml_.fail(e, "name", "duplicate parameter name '" + n.name + "' (first declared at " +
                               describe_loc(it->second) + ")");
    pugi::xml_attribute len = e.attribute("length");
    const char* len_name = "length";
    if (pugi::xml_attribute l2 = e.attribute("len")) {
      if (len) xml_.fail(e, "len", "give either length or len, not both");
      len = l2;
      len_name = "len";
    }
    if (!len) xml_.fail(e, "<" + tag + " name=\"" + n.name + "\"> needs a length attribute (positions to reserve)");
    const std::string_view v = len.value();
    int value = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
    if (ec != std::errc() || end != v.data() + v.size() || value <= 0)
      xml_.fail(e, len_name, std::string(len_name) + " must be a positive integer, not \"" + std::string(v) + "\"");
    n.length = value;
    // Placeholder: the element's text, or a placeholder attribute (not both).
    std::string content;
    for (pugi::xml_node c : e.children()) {
      if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) content += c.value();
      else if (c.type() == pugi::node_element)
        xml_.fail(c, "<" + tag + "> holds only placeholder text, not <" + std::string(c.name()) + ">");
    }
    if (pugi::xml_attribute p = e.attribute("placeholder")) {
      if (!all_space(content)) xml_.fail(e, "placeholder", "placeholder given both as text and as attribute");
      n.placeholder = p.value();
    } else {
      n.placeholder = all_space(content) ? "" : content;
    }
    return n;
  }

  const Xml& xml_;
};

// ---------------------------------------------------------------- prompt

class PromptParser {
 public:
  explicit PromptParser(const Xml& xml) : xml_(xml) {}

  void body(pugi::xml_node parent, bool in_role, std::vector<Node>& out) {
    BlockBuilder b(out);
    for (pugi::xml_node c : parent.children()) {
      if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
        b.text(c.value(), xml_.loc(c));
      } else if (c.type() == pugi::node_element) {
        b.block(element(c, in_role));
      }
    }
    b.finish();
  }

 private:
  Node element(pugi::xml_node e, bool in_role) {
    const std::string tag = e.name();
    Node n;
    n.loc = xml_.loc(e);
    Role role;
    if (role_of(tag, &role)) {
      xml_.check_attributes(e, {});
      if (in_role) xml_.fail(e, "role tag <" + tag + "> inside another role tag");
      n.kind = Node::Kind::kRole;
      n.role = role;
      body(e, true, n.children);
      return n;
    }
    if (is_reserved(tag))
      xml_.fail(e, "<" + tag + "> is not allowed in a prompt: a prompt imports modules as <NAME/>, "
                                "with text and role tags around them");
    n.kind = Node::Kind::kImport;
    n.name = tag;
    std::map<std::string_view, int> seen;
    for (pugi::xml_attribute a : e.attributes()) {
      if (seen[a.name()]++) xml_.fail(e, a.name(), "argument '" + std::string(a.name()) + "' given twice");
      n.args.push_back({a.name(), a.value(), xml_.loc(e, a.name())});
    }
    body(e, in_role, n.children);
    return n;
  }

  const Xml& xml_;
};

}  // namespace

SchemaDoc parse_schema(std::string_view text, std::string_view source) {
  Xml xml(text, source);
  pugi::xml_node root = xml.root("schema");
  xml.check_attributes(root, {"name"});
  SchemaDoc doc;
  doc.source = std::string(source);
  doc.loc = xml.loc(root);
  pugi::xml_attribute name = root.attribute("name");
  if (!name || !*name.value()) xml.fail(root, "<schema> needs a name attribute");
  doc.name = name.value();
  if (doc.name.find('/') != std::string::npos) xml.fail(root, "name", "a schema name cannot contain '/'");
  SchemaParser p(xml);
  std::map<std::string, Loc> scope;
  SchemaParser::Ctx ctx{false, false, &scope, nullptr};
  p.body(root, ctx, doc.body);
  return doc;
}

PromptDoc parse_prompt(std::string_view text, std::string_view source) {
  Xml xml(text, source);
  pugi::xml_node root = xml.root("prompt");
  xml.check_attributes(root, {"schema", "layout"});
  PromptDoc doc;
  doc.source = std::string(source);
  doc.loc = xml.loc(root);
  pugi::xml_attribute schema = root.attribute("schema");
  if (!schema || !*schema.value()) xml.fail(root, "<prompt> needs a schema attribute naming its schema");
  doc.schema = schema.value();
  doc.schema_loc = xml.loc(root, "schema");
  if (pugi::xml_attribute layout = root.attribute("layout")) {
    const std::string_view v = layout.value();
    if (v == "compact") doc.layout = LayoutMode::kCompact;
    else if (v != "schema")
      xml.fail(root, "layout", "layout must be \"schema\" or \"compact\", not \"" + std::string(v) + "\"");
  }
  PromptParser p(xml);
  p.body(root, false, doc.body);
  return doc;
}

}  // namespace pc::pml
