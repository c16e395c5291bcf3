// PML inputs built to exhaust a server: nesting deep enough to overflow a recursive
// walk, lengths whose sums overflow int32 positions, and schemas of tens of
// thousands of modules (docs/pml.md "Limits").
#include <gtest/gtest.h>

#include <ctime>

#include "pml/plan.h"
#include "word_tokenizer.h"

namespace pc::pml {
namespace {

using test::throws_at;
using test::WordTokenizer;

class Limits : public ::testing::Test {
 protected:
  WordTokenizer tok;
  Encoder enc{tok, test::word_markers()};
};

std::string nested_modules(int depth) {
  std::string s = "<schema name=\"s\">";
  for (int i = 0; i < depth; ++i) s += "<module name=\"m" + std::to_string(i) + "\">";
  s += "x";
  for (int i = 0; i < depth; ++i) s += "</module>";
  return s + "</schema>";
}

TEST_F(Limits, DeepSchemaIsAnErrorAtTheFirstElementTooDeep) {
  // <schema> is level 1, so module k (from 0) is at level k + 2.
  EXPECT_NO_THROW(compile_schema(nested_modules(kMaxNesting - 1), enc));
  const std::string deep = nested_modules(7000);  // a recursive walk overflowed the stack here
  const size_t col = deep.find("<module name=\"m" + std::to_string(kMaxNesting - 1) + "\">") + 1;
  EXPECT_TRUE(throws_at([&] { compile_schema(deep, enc); }, 1, int(col),
                        "elements nest more than 64 levels deep (<module> is at level 65)"));
}

TEST_F(Limits, DeepPromptIsAnError) {
  std::string p = "<prompt schema=\"s\">";
  for (int i = 0; i < 20000; ++i) p += "<a>";
  for (int i = 0; i < 20000; ++i) p += "</a>";
  p += "</prompt>";
  EXPECT_TRUE(throws_at([&] { parse_prompt(p); }, 1, int(std::string("<prompt schema=\"s\">").size() + 63 * 3 + 1),
                        "nest more than 64 levels deep (<a> is at level 65)"));
}

TEST_F(Limits, ParameterLengthsCannotOverflowPositions) {
  const std::string one = "<schema name=\"s\"><module name=\"m\">a <param name=\"p\" len=\"2147483647\"/></module></schema>";
  EXPECT_TRUE(throws_at([&] { compile_schema(one, enc); }, 1, 37,
                        "parameter 'p' (length 2147483647) takes the schema past 1073741824 positions"));
  std::string eight = "<schema name=\"s\"><module name=\"m\">";
  for (int i = 0; i < 8; ++i) eight += "<param name=\"p" + std::to_string(i) + "\" len=\"1073741824\"/>";
  eight += "</module></schema>";
  // BOS is position 0, so the first slot already ends past the limit.
  EXPECT_TRUE(throws_at([&] { compile_schema(eight, enc); }, 1, 35, "parameter 'p0' (length 1073741824)"));
  // Just under the limit is laid out, and positions stay positive.
  std::string fits = "<schema name=\"s\"><module name=\"m\">";
  for (int i = 0; i < 4; ++i) fits += "<param name=\"p" + std::to_string(i) + "\" len=\"268435455\"/>";
  fits += "</module></schema>";
  const SchemaLayout L = compile_schema(fits, enc);
  EXPECT_EQ(L.length, 1 + 4 * 268435455);
  EXPECT_EQ(L.modules[1].params[3].slot, 1 + 3 * 268435455);
}

// 40,000 modules on one line, each after root text, and a prompt importing them all:
// work linear in the schema's size (one such schema took 17 s when each element's
// column and each module's context were recounted from the start).
TEST_F(Limits, ManyModulesLayOutAndPlanInLinearTime) {
  constexpr int kModules = 40000;
  std::string schema = "<schema name=\"s\">", prompt = "<prompt schema=\"s\">";
  for (int i = 0; i < kModules; ++i) {
    const std::string name = "m" + std::to_string(i);
    schema += "root" + std::to_string(i) + " <module name=\"" + name + "\">t" + std::to_string(i) + "</module>";
    prompt += "<" + name + "/>";
  }
  schema += "</schema>";
  prompt += "end</prompt>";
  // CPU time, not wall time: a loaded test machine stretches the latter.
  const std::clock_t t0 = std::clock();
  const SchemaLayout L = compile_schema(schema, enc);
  const PromptPlan P = plan_prompt(prompt, L, enc);
  const double s = double(std::clock() - t0) / CLOCKS_PER_SEC;
  ASSERT_EQ(L.modules.size(), size_t(kModules) + 1);
  EXPECT_EQ(P.modules.size(), size_t(kModules) + 1);
  // Each module's context is the root's tokens before it: BOS and i + 1 root words.
  EXPECT_EQ(L.modules[kModules].context[0].n_tokens, kModules + 1);
  EXPECT_LT(s, 5.0) << "layout and plan of " << kModules << " modules took " << s << " s of CPU";
}

// The context digest: equal context, equal digest; a change anywhere in it, another.
TEST_F(Limits, ContextDigestCoversEveryContextToken) {
  auto digest = [&](const std::string& before) {
    const SchemaLayout L = compile_schema("<schema name=\"s\">" + before + " <module name=\"m\">x</module></schema>", enc);
    return L.modules[L.find("m")].digest;
  };
  EXPECT_EQ(digest("a b c"), digest("a b c"));
  EXPECT_NE(digest("a b c"), digest("z b c"));
  EXPECT_NE(digest("a b c"), digest("a b z"));
  EXPECT_NE(digest("a b c"), digest("a b"));
}

}  // namespace
}  // namespace pc::pml
