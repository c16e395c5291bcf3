// Prompts → execution plans, against hand-computed positions.
#include <gtest/gtest.h>

#include "pml/describe.h"
#include "pml/plan.h"
#include "word_tokenizer.h"

namespace pc::pml {
namespace {

using test::throws_at;
using test::WordTokenizer;

// Same schema as layout_test: length 22;
//   root BOS0 <sys>1 be2 nice3 </sys>4 mid8 text9 end21
//   a [5, 8); reply [10, 18) with slot lang [12, 16) (placeholder English12);
//   union [18, 21): f [18, 20), c [18, 21).
constexpr const char* kSchema = R"(<schema name="s">
  <system>be nice</system>
  <module name="a">alpha beta gamma</module>
  mid text
  <module name="reply">Reply in <parameter name="lang" length="4">English</parameter> , briefly.</module>
  <union>
    <module name="f">be formal</module>
    <module name="c">be very casual</module>
  </union>
  end
</schema>)";

constexpr const char* kPrompt = R"(<prompt schema="s">
  Question first
  <reply lang="French"/>
  between
  <c/>
  <user>why?</user>
  <assistant/>
</prompt>)";

class PlanTest : public ::testing::Test {
 protected:
  WordTokenizer tok;
  Encoder enc{tok, test::word_markers()};
  SchemaLayout L = compile_schema(kSchema, enc);
  std::vector<int32_t> ids(const std::string& words) { return tok.encode(words, false, false); }
  PromptPlan plan(const std::string& text) { return plan_prompt(text, L, enc); }
};

void expect_span(const PlanSpan& s, int32_t begin, int32_t end, int32_t schema_pos, int32_t pos) {
  EXPECT_EQ(s.begin, begin);
  EXPECT_EQ(s.end, end);
  EXPECT_EQ(s.schema_pos, schema_pos);
  EXPECT_EQ(s.pos, pos);
}

TEST_F(PlanTest, SchemaLayoutPositions) {
  const PromptPlan P = plan(kPrompt);
  EXPECT_EQ(P.layout, LayoutMode::kSchema);
  ASSERT_EQ(P.items.size(), 7u);

  // 0: the root, always first: its own tokens where the schema put them.
  const PlanItem& root = P.items[0];
  EXPECT_EQ(root.kind, PlanItem::Kind::kModule);
  EXPECT_EQ(root.module, 0);
  ASSERT_EQ(root.spans.size(), 3u);
  expect_span(root.spans[0], 0, 5, 0, 0);
  expect_span(root.spans[1], 5, 7, 8, 8);
  expect_span(root.spans[2], 7, 8, 21, 21);

  // 1: text before the first import: positions from the schema's end (22).
  EXPECT_EQ(P.items[1].kind, PlanItem::Kind::kTokens);
  EXPECT_EQ(P.items[1].tokens, ids("Question first"));
  EXPECT_EQ(P.items[1].module, -1);
  ASSERT_EQ(P.items[1].spans.size(), 1u);
  expect_span(P.items[1].spans[0], 0, 2, 22, 22);

  // 2: reply without its placeholder (the argument replaces it).
  const PlanItem& reply = P.items[2];
  EXPECT_EQ(reply.kind, PlanItem::Kind::kModule);
  EXPECT_EQ(reply.module, L.find("reply"));
  ASSERT_EQ(reply.spans.size(), 2u);
  expect_span(reply.spans[0], 0, 2, 10, 10);
  expect_span(reply.spans[1], 3, 5, 16, 16);
  EXPECT_EQ(reply.loc.line, 3);
  EXPECT_EQ(reply.loc.column, 3);

  // 3: the argument at its slot's positions.
  const PlanItem& arg = P.items[3];
  EXPECT_TRUE(arg.is_argument());
  EXPECT_EQ(arg.module, L.find("reply"));
  EXPECT_EQ(arg.param, 0);
  EXPECT_EQ(arg.tokens, ids("French"));
  expect_span(arg.spans[0], 0, 1, 12, 12);

  // 4: text between imports continues after the earlier text.
  EXPECT_EQ(P.items[4].tokens, ids("between"));
  expect_span(P.items[4].spans[0], 0, 1, 24, 24);

  // 5: the union member.
  EXPECT_EQ(P.items[5].module, L.find("c"));
  expect_span(P.items[5].spans[0], 0, 3, 18, 18);

  // 6: role tag and generation prompt, merged into one run.
  EXPECT_EQ(P.items[6].tokens, ids("<usr> why? </usr> <gen>"));
  expect_span(P.items[6].spans[0], 0, 4, 25, 25);

  EXPECT_EQ(P.modules, (std::vector<int>{0, L.find("reply"), L.find("c")}));
  EXPECT_EQ(P.n_module_tokens, 8 + 4 + 3);
  EXPECT_EQ(P.n_computed_tokens, 2 + 1 + 1 + 4);
  EXPECT_EQ(P.n_tokens(), 23);
  EXPECT_EQ(P.next_pos, 29);
}

TEST_F(PlanTest, CompactLayoutIsContiguousAndKeepsSchemaPositions) {
  std::string text = kPrompt;
  text.replace(text.find("schema=\"s\""), 10, "schema=\"s\" layout=\"compact\"");
  const PromptPlan P = plan(text);
  EXPECT_EQ(P.layout, LayoutMode::kCompact);
  ASSERT_EQ(P.items.size(), 7u);
  expect_span(P.items[0].spans[0], 0, 5, 0, 0);
  expect_span(P.items[0].spans[1], 5, 7, 8, 5);
  expect_span(P.items[0].spans[2], 7, 8, 21, 7);
  expect_span(P.items[1].spans[0], 0, 2, 22, 8);
  expect_span(P.items[2].spans[0], 0, 2, 10, 10);
  expect_span(P.items[2].spans[1], 3, 5, 16, 12);
  expect_span(P.items[3].spans[0], 0, 1, 12, 14);
  expect_span(P.items[4].spans[0], 0, 1, 24, 15);
  expect_span(P.items[5].spans[0], 0, 3, 18, 16);
  expect_span(P.items[6].spans[0], 0, 4, 25, 19);
  EXPECT_EQ(P.next_pos, 23);
  EXPECT_EQ(P.n_tokens(), 23);
}

TEST_F(PlanTest, ArgumentShorterEqualLonger) {
  // Shorter (1 of 4): above. Equal: 4 tokens fill the slot.
  const PromptPlan eq = plan(R"(<prompt schema="s"><reply lang="very formal British English"/></prompt>)");
  ASSERT_EQ(eq.items.size(), 3u);
  EXPECT_EQ(eq.items[2].tokens, ids("very formal British English"));
  expect_span(eq.items[2].spans[0], 0, 4, 12, 12);
  // Longer: an error at the attribute.
  EXPECT_TRUE(throws_at([&] { plan("<prompt schema=\"s\">\n  <reply lang=\"very formal old British English\"/></prompt>"); },
                        2, 10, "argument for parameter 'lang' of module 'reply' is 5 tokens; its slot holds 4"));
  // Empty: the slot stays empty, the placeholder is still left out.
  const PromptPlan empty = plan(R"(<prompt schema="s"><reply lang=""/></prompt>)");
  ASSERT_EQ(empty.items.size(), 3u);
  EXPECT_EQ(empty.items[1].n_tokens(), 4);
  EXPECT_EQ(empty.items[2].n_tokens(), 0);
}

TEST_F(PlanTest, MissingArgumentKeepsPlaceholder) {
  const PromptPlan P = plan(R"(<prompt schema="s"><reply/><a/></prompt>)");
  ASSERT_EQ(P.items.size(), 3u);
  ASSERT_EQ(P.items[1].spans.size(), 2u);
  expect_span(P.items[1].spans[0], 0, 3, 10, 10);  // Reply in English
  expect_span(P.items[1].spans[1], 3, 5, 16, 16);
  EXPECT_EQ(P.items[2].module, L.find("a"));
  EXPECT_EQ(P.next_pos, 22);  // no prompt text: generation starts after the schema
}

TEST_F(PlanTest, NestedImportsAndTextInside) {
  WordTokenizer t2;
  Encoder e2(t2, test::word_markers());
  const SchemaLayout N = compile_schema(R"(<schema name="n">intro
<module name="doc">title <module name="ch1">one one</module> between chapters
  <module name="ch2">two two two</module>
  <union><module name="x">x</module><module name="y">y y</module></union> tail</module> outro</schema>)",
                                        e2);
  const PromptPlan P = plan_prompt(R"(<prompt schema="n"><doc>look <ch2/><y/></doc>Q</prompt>)", N, e2);
  ASSERT_EQ(P.items.size(), 6u);
  EXPECT_EQ(P.items[0].module, 0);
  ASSERT_EQ(P.items[0].spans.size(), 2u);
  expect_span(P.items[0].spans[1], 2, 3, 13, 13);
  EXPECT_EQ(P.items[1].module, N.find("doc"));
  ASSERT_EQ(P.items[1].spans.size(), 3u);
  expect_span(P.items[1].spans[1], 1, 3, 5, 5);
  EXPECT_EQ(P.items[2].tokens, t2.encode("look", false, false));
  expect_span(P.items[2].spans[0], 0, 1, 14, 14);
  EXPECT_EQ(P.items[3].module, N.find("doc/ch2"));
  expect_span(P.items[3].spans[0], 0, 3, 7, 7);
  EXPECT_EQ(P.items[4].module, N.find("doc/y"));
  expect_span(P.items[4].spans[0], 0, 2, 10, 10);
  expect_span(P.items[5].spans[0], 0, 1, 15, 15);
  EXPECT_EQ(P.next_pos, 16);
  // Naming a nested module at the top level says where it is.
  EXPECT_TRUE(throws_at([&] { plan_prompt("<prompt schema=\"n\"><ch2/></prompt>", N, e2); }, 1, 20,
                        "unknown module 'ch2' in schema 'n'; it is 'doc/ch2': import it as <doc><ch2/></doc>"));
}

TEST_F(PlanTest, SchemaLookupByName) {
  SchemaLookup find = [&](std::string_view name) -> const SchemaLayout* { return name == "s" ? &L : nullptr; };
  EXPECT_EQ(plan_prompt("<prompt schema=\"s\"><a/></prompt>", find, enc).items.size(), 2u);
  EXPECT_TRUE(throws_at([&] { plan_prompt("<prompt\n  schema=\"nope\"><a/></prompt>", find, enc, "p.pml"); }, 2, 3,
                        "unknown schema 'nope'"));
  try {
    plan_prompt("<prompt schema=\"nope\"/>", find, enc, "p.pml");
  } catch (const PmlError& e) {
    EXPECT_STREQ(e.what(), "p.pml: line 1, column 9: unknown schema 'nope'");
  }
}

TEST_F(PlanTest, DescribePlan) {
  const PromptPlan P = plan(kPrompt);
  const std::string d = describe(P, L, &tok);
  EXPECT_NE(d.find("layout schema: 7 items, 23 tokens (15 from modules, 8 computed), next position 29"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("argument reply.lang"), std::string::npos) << d;
  EXPECT_NE(d.find("[0, 5) [8, 10) [21, 22)"), std::string::npos) << d;
  std::string text = kPrompt;
  text.replace(text.find("schema=\"s\""), 10, "schema=\"s\" layout=\"compact\"");
  const std::string c = describe(plan(text), L);
  EXPECT_NE(c.find("[5, 7)<-[8, 10)"), std::string::npos) << c;
}

}  // namespace
}  // namespace pc::pml
