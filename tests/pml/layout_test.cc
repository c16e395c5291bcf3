// Schema layouts against hand-computed positions (one token per word).
#include <gtest/gtest.h>

#include "pml/describe.h"
#include "pml/layout.h"
#include "word_tokenizer.h"

namespace pc::pml {
namespace {

using test::WordTokenizer;

// Positions (BOS = 0):
//   root   BOS0 <sys>1 be2 nice3 </sys>4 .. mid8 text9 .. end21
//   a      alpha5 beta6 gamma7                                   [5, 8)
//   reply  Reply10 in11 [slot 12..15: English12] ,16 briefly.17  [10, 18)
//   union  [18, 21): f = be18 formal19 [18, 20); c = be18 very19 casual20 [18, 21)
constexpr const char* kSchema = R"(<schema name="s">
  <system>be nice</system>
  <module name="a">alpha beta gamma</module>
  mid text
  <module name="reply">Reply in <parameter name="lang" length="4">English</parameter> , briefly.</module>
  <union scaffold="true">
    <module name="f">be formal</module>
    <module name="c">be very casual</module>
  </union>
  end
</schema>)";

class LayoutTest : public ::testing::Test {
 protected:
  WordTokenizer tok;
  Encoder enc{tok, test::word_markers()};
  std::vector<int32_t> ids(const std::string& words) { return tok.encode(words, false, false); }
  static std::vector<int32_t> bos(std::vector<int32_t> v) {
    v.insert(v.begin(), 1);
    return v;
  }
};

TEST_F(LayoutTest, PositionsInDocumentOrder) {
  const SchemaLayout L = compile_schema(kSchema, enc);
  EXPECT_EQ(L.name, "s");
  EXPECT_EQ(L.length, 22);
  ASSERT_EQ(L.modules.size(), 5u);

  const ModuleLayout& root = L.root();
  EXPECT_EQ(root.path, "");
  EXPECT_EQ(root.start, 0);
  EXPECT_EQ(root.length, 22);
  EXPECT_EQ(root.tokens, bos(ids("<sys> be nice </sys> mid text end")));
  EXPECT_EQ(root.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 8, 9, 21}));
  EXPECT_EQ(root.children, (std::vector<int>{1, 2, 3, 4}));

  const ModuleLayout& a = L.modules[L.find("a")];
  EXPECT_EQ(a.start, 5);
  EXPECT_EQ(a.length, 3);
  EXPECT_EQ(a.tokens, ids("alpha beta gamma"));
  EXPECT_EQ(a.positions, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(a.parent, 0);
  EXPECT_EQ(a.union_index, -1);
  ASSERT_EQ(a.context.size(), 1u);
  EXPECT_EQ(a.context[0].module, 0);
  EXPECT_EQ(a.context[0].n_tokens, 5);  // BOS <sys> be nice </sys>

  const ModuleLayout& reply = L.modules[L.find("reply")];
  EXPECT_EQ(reply.start, 10);
  EXPECT_EQ(reply.length, 8);
  EXPECT_EQ(reply.tokens, ids("Reply in English , briefly."));
  EXPECT_EQ(reply.positions, (std::vector<int32_t>{10, 11, 12, 16, 17}));
  ASSERT_EQ(reply.params.size(), 1u);
  EXPECT_EQ(reply.params[0].name, "lang");
  EXPECT_EQ(reply.params[0].slot, 12);
  EXPECT_EQ(reply.params[0].length, 4);
  EXPECT_EQ(reply.params[0].placeholder, "English");
  EXPECT_EQ(reply.params[0].begin, 2);
  EXPECT_EQ(reply.params[0].end, 3);
  EXPECT_EQ(reply.context[0].n_tokens, 7);  // ... </sys> mid text

  ASSERT_EQ(L.unions.size(), 1u);
  EXPECT_EQ(L.unions[0].start, 18);
  EXPECT_EQ(L.unions[0].length, 3);
  EXPECT_EQ(L.unions[0].parent, 0);
  EXPECT_EQ(L.unions[0].members, (std::vector<int>{L.find("f"), L.find("c")}));
  const ModuleLayout& f = L.modules[L.find("f")];
  const ModuleLayout& c = L.modules[L.find("c")];
  EXPECT_EQ(f.start, 18);
  EXPECT_EQ(f.length, 2);
  EXPECT_EQ(c.start, 18);
  EXPECT_EQ(c.length, 3);
  EXPECT_EQ(f.union_index, 0);
  EXPECT_EQ(c.positions, (std::vector<int32_t>{18, 19, 20}));
  // Union members attend to the root text before the union, not to each other.
  ASSERT_EQ(c.context.size(), 1u);
  EXPECT_EQ(c.context[0].n_tokens, 7);

  const std::vector<TokenRun> runs = token_runs(root);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].begin, 5);
  EXPECT_EQ(runs[1].end, 7);
  EXPECT_EQ(runs[1].pos, 8);
}

TEST_F(LayoutTest, NestedModules) {
  // BOS0 intro1; doc [2, 13): title2 ch1[3,5) between5 chapters6 ch2[7,10)
  // union[10,12) (x[10,11), y[10,12)) tail12; outro13.
  const SchemaLayout L = compile_schema(R"(<schema name="n">
intro
<module name="doc">
  title
  <module name="ch1">one one</module>
  between chapters
  <module name="ch2" cache="false">two two two</module>
  <union>
    <module name="x">x</module>
    <module name="y">y y</module>
  </union>
  tail
</module>
outro
</schema>)", enc);
  EXPECT_EQ(L.length, 14);
  ASSERT_EQ(L.modules.size(), 6u);
  const int doc = L.find("doc"), ch1 = L.find("doc/ch1"), ch2 = L.find("doc/ch2"), y = L.find("doc/y");
  EXPECT_EQ(doc, 1);
  EXPECT_EQ(ch1, 2);
  EXPECT_EQ(ch2, 3);
  EXPECT_EQ(y, 5);
  EXPECT_EQ(L.find("ch2"), -1);
  EXPECT_EQ(L.child(doc, "ch2"), ch2);
  EXPECT_EQ(L.modules[doc].start, 2);
  EXPECT_EQ(L.modules[doc].length, 11);
  EXPECT_EQ(L.modules[doc].positions, (std::vector<int32_t>{2, 5, 6, 12}));
  EXPECT_EQ(L.modules[doc].children, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(L.modules[ch1].start, 3);
  EXPECT_EQ(L.modules[ch1].length, 2);
  EXPECT_EQ(L.modules[ch2].start, 7);
  EXPECT_EQ(L.modules[ch2].length, 3);
  EXPECT_FALSE(L.modules[ch2].cache);
  EXPECT_TRUE(L.modules[ch1].cache);
  EXPECT_EQ(L.modules[y].start, 10);
  EXPECT_EQ(L.modules[y].length, 2);
  EXPECT_EQ(L.unions[0].parent, doc);
  EXPECT_EQ(L.unions[0].start, 10);
  EXPECT_EQ(L.unions[0].length, 2);
  EXPECT_EQ(L.root().positions, (std::vector<int32_t>{0, 1, 13}));
  EXPECT_EQ(L.chain(y), (std::vector<int>{0, doc, y}));

  // ch2 attends to BOS intro (root) and title between chapters (doc).
  ASSERT_EQ(L.modules[ch2].context.size(), 2u);
  EXPECT_EQ(L.modules[ch2].context[0].module, 0);
  EXPECT_EQ(L.modules[ch2].context[0].n_tokens, 2);
  EXPECT_EQ(L.modules[ch2].context[1].module, doc);
  EXPECT_EQ(L.modules[ch2].context[1].n_tokens, 3);
  EXPECT_EQ(L.modules[ch1].context[1].n_tokens, 1);
  EXPECT_EQ(L.modules[y].context[1].n_tokens, 3);
}

TEST_F(LayoutTest, ParameterSlots) {
  // m [1, 13): a1 [p 2..4: ph2 ph3] b5 [q 6..7: none] c8 [r 9..11: x9 y10 z11] d12
  const SchemaLayout L = compile_schema(R"(<schema name="p"><module name="m">a <param name="p" len="3">ph ph</param> b
    <parameter name="q" length="2"/> c <parameter name="r" length="3" placeholder="x y z"/> d</module></schema>)",
                                        enc);
  const ModuleLayout& m = L.modules[1];
  EXPECT_EQ(m.start, 1);
  EXPECT_EQ(m.length, 12);
  EXPECT_EQ(L.length, 13);
  EXPECT_EQ(m.positions, (std::vector<int32_t>{1, 2, 3, 5, 8, 9, 10, 11, 12}));
  ASSERT_EQ(m.params.size(), 3u);
  EXPECT_EQ(m.params[0].slot, 2);
  EXPECT_EQ(m.params[0].length, 3);
  EXPECT_EQ(m.params[0].end - m.params[0].begin, 2);
  EXPECT_EQ(m.params[1].slot, 6);
  EXPECT_EQ(m.params[1].begin, m.params[1].end);  // no placeholder: an empty slot
  EXPECT_EQ(m.params[2].slot, 9);
  EXPECT_EQ(m.params[2].placeholder, "x y z");
  EXPECT_EQ(m.params[2].end - m.params[2].begin, 3);  // placeholder as long as the slot
}

TEST_F(LayoutTest, RoleTagsBecomeMarkers) {
  const SchemaLayout L = compile_schema(
      "<schema name=\"r\"><system>sys text</system><module name=\"m\"><user>hello</user><assistant>hi"
      "</assistant><assistant/></module></schema>",
      enc);
  EXPECT_EQ(L.root().tokens, bos(ids("<sys> sys text </sys>")));
  // An empty <assistant/> opens the model's turn: the generation prompt.
  EXPECT_EQ(L.modules[1].tokens, ids("<usr> hello </usr> <ast> hi </ast> <gen>"));
  EXPECT_EQ(L.modules[1].start, 5);
}

TEST_F(LayoutTest, NoBosWhenTheModelAddsNone) {
  tok.add_bos_ = false;
  const SchemaLayout L = compile_schema("<schema name=\"b\">x <module name=\"m\">y</module></schema>", enc);
  EXPECT_EQ(L.root().tokens, ids("x"));
  EXPECT_EQ(L.modules[1].start, 1);
}

TEST_F(LayoutTest, DigestsAreStableAndContentAddressed) {
  const SchemaLayout a = compile_schema(kSchema, enc);
  const SchemaLayout b = compile_schema(kSchema, enc);
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.digest_hex().size(), 16u);
  for (size_t i = 0; i < a.modules.size(); ++i) EXPECT_EQ(a.modules[i].digest, b.modules[i].digest);

  // Changing the last module changes the schema digest but not the modules
  // before it (their context and tokens are the same).
  std::string changed = kSchema;
  changed.replace(changed.find("be very casual"), 14, "be very relaxed");
  const SchemaLayout c = compile_schema(changed, enc);
  EXPECT_NE(a.digest, c.digest);
  EXPECT_EQ(a.modules[a.find("a")].digest, c.modules[c.find("a")].digest);
  EXPECT_EQ(a.modules[a.find("f")].digest, c.modules[c.find("f")].digest);
  EXPECT_NE(a.modules[a.find("c")].digest, c.modules[c.find("c")].digest);

  // Changing root text before a module changes that module's digest (its context).
  std::string earlier = kSchema;
  earlier.replace(earlier.find("be nice"), 7, "be kind");
  const SchemaLayout d = compile_schema(earlier, enc);
  EXPECT_NE(a.modules[a.find("a")].digest, d.modules[d.find("a")].digest);

  // Other markers (another model's template): another digest.
  RoleMarkers other = test::word_markers();
  other.user.prefix = "<user>";
  Encoder enc2(tok, other);
  EXPECT_NE(enc.fingerprint(), enc2.fingerprint());
  EXPECT_NE(compile_schema(kSchema, enc2).digest, a.digest);
}

TEST_F(LayoutTest, DescribeListsModules) {
  const SchemaLayout L = compile_schema(kSchema, enc, "s.pml");
  const std::string d = describe(L, &tok);
  EXPECT_NE(d.find("schema 's' (s.pml): 22 positions, 4 modules, 1 unions, digest " + L.digest_hex()),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("reply"), std::string::npos);
  EXPECT_NE(d.find("[10, 18)"), std::string::npos);
  EXPECT_NE(d.find("param lang [12, 16) placeholder 1 tokens"), std::string::npos) << d;
  EXPECT_NE(d.find("<union 0>"), std::string::npos);
  EXPECT_NE(d.find("one of: f, c"), std::string::npos);
}

// --- whitespace rules, at the syntax-tree level

TEST(PmlDocument, WhitespaceTrimmedAtBlocksKeptAroundParameters) {
  const SchemaDoc d = parse_schema(R"(<schema name="w">
    Intro   text
    <module name="m">
      Reply in <parameter name="l" length="2"/>, briefly.
    </module>
    <user>  Q  </user>
  </schema>)");
  ASSERT_EQ(d.body.size(), 3u);
  EXPECT_EQ(d.body[0].text, "Intro   text");
  const Node& m = d.body[1];
  ASSERT_EQ(m.children.size(), 3u);
  EXPECT_EQ(m.children[0].text, "Reply in ");
  EXPECT_EQ(m.children[1].kind, Node::Kind::kParam);
  EXPECT_EQ(m.children[2].text, ", briefly.");
  EXPECT_EQ(d.body[2].kind, Node::Kind::kRole);
  EXPECT_EQ(d.body[2].children[0].text, "Q");
}

TEST(PmlDocument, EntitiesCdataAndComments) {
  const SchemaDoc d = parse_schema(
      "<schema name=\"e\"><module name=\"m\">a &lt;b&gt; <!-- note --><![CDATA[<raw>]]></module></schema>");
  ASSERT_EQ(d.body[0].children.size(), 1u);
  EXPECT_EQ(d.body[0].children[0].text, "a <b> <raw>");
}

}  // namespace
}  // namespace pc::pml
