// Every PML error names its line and column and says what is wrong.
#include <gtest/gtest.h>

#include "pml/plan.h"
#include "word_tokenizer.h"

namespace pc::pml {
namespace {

using test::throws_at;
using test::WordTokenizer;

class SchemaErrors : public ::testing::Test {
 protected:
  WordTokenizer tok;
  Encoder enc{tok, test::word_markers()};
  ::testing::AssertionResult at(const std::string& schema, int line, int col, const std::string& part) {
    return throws_at([&] { compile_schema(schema, enc); }, line, col, part);
  }
};

TEST_F(SchemaErrors, MalformedXml) {
  EXPECT_TRUE(at("<schema name=\"s\">\n  <module name=\"a\">text</modul>\n</schema>", 2, 26,
                 "malformed XML: Start-end tags mismatch"));
  EXPECT_TRUE(at("<schema name=\"s\">\n  <module name=\"a>text</module>\n</schema>", 2, 17,
                 "malformed XML: Error parsing element attribute"));
  EXPECT_TRUE(at("", 1, 1, "no <schema> element"));
  EXPECT_TRUE(at("<schema name=\"s\"/>\ntrailing", 2, 1, "text outside the <schema> element"));
  EXPECT_TRUE(at("<schema name=\"s\"/>\n<schema name=\"t\"/>", 2, 1, "found a second element <schema>"));
  EXPECT_TRUE(at("<prompt schema=\"s\"/>", 1, 1, "expected a <schema> element, found <prompt>"));
}

TEST_F(SchemaErrors, LinesCountCrLf) {
  EXPECT_TRUE(at("<schema name=\"s\">\r\n\r\n   <module>x</module></schema>", 3, 4,
                 "<module> needs a name attribute"));
}

TEST_F(SchemaErrors, Names) {
  EXPECT_TRUE(at("<schema>x</schema>", 1, 1, "<schema> needs a name attribute"));
  EXPECT_TRUE(at("<schema name=\"s\">\n <module>x</module></schema>", 2, 2, "<module> needs a name attribute"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><parameter length=\"2\"/></module></schema>", 1, 35,
                 "<parameter> needs a name attribute"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"a b\"/></schema>", 1, 26, "invalid name 'a b'"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"user\"/></schema>", 1, 26, "module name 'user' is reserved"));
  EXPECT_TRUE(at("<schema name=\"s\">\n<module name=\"a\">x</module>\n<module name=\"a\">y</module></schema>", 3, 9,
                 "duplicate module name 'a' (first declared at line 2, column 1)"));
  // Union members share their parent's scope.
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"a\"/><union><module name=\"a\"/></union></schema>", 1, 51,
                 "duplicate module name 'a'"));
  // The same name in different parents is fine.
  EXPECT_NO_THROW(compile_schema(
      "<schema name=\"s\"><module name=\"a\"><module name=\"x\"/></module><module name=\"b\"><module "
      "name=\"x\"/></module></schema>",
      enc));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\">\n <param name=\"p\" len=\"1\"/>\n <param name=\"p\" len=\"1\"/>"
                 "</module></schema>",
                 3, 9, "duplicate parameter name 'p' (first declared at line 2, column 2)"));
}

TEST_F(SchemaErrors, Parameters) {
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><param name=\"p\"/></module></schema>", 1, 35,
                 "<param name=\"p\"> needs a length attribute"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><param name=\"p\" length=\"0\"/></module></schema>", 1, 51,
                 "length must be a positive integer, not \"0\""));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><param name=\"p\" len=\"2x\"/></module></schema>", 1, 51,
                 "len must be a positive integer, not \"2x\""));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><param name=\"p\" length=\"2\" len=\"2\"/></module></schema>",
                 1, 62, "give either length or len, not both"));
  EXPECT_TRUE(at("<schema name=\"s\">\n  <parameter name=\"p\" length=\"2\"/></schema>", 2, 3,
                 "<parameter> outside a module"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\">\n<param name=\"p\" len=\"2\">one two three</param></module></schema>",
                 2, 1, "placeholder of parameter 'p' is 3 tokens; its slot holds 2"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\"><param name=\"p\" len=\"2\" placeholder=\"a\">b</param></module></schema>",
                 1, 59, "placeholder given both as text and as attribute"));
}

TEST_F(SchemaErrors, Structure) {
  EXPECT_TRUE(at("<schema name=\"s\"><union>\n  stray <module name=\"a\"/></union></schema>", 2, 3,
                 "text inside <union> must be inside one of its <module>s"));
  EXPECT_TRUE(at("<schema name=\"s\"><union><user>x</user></union></schema>", 1, 25,
                 "<union> holds only <module> elements, not <user>"));
  EXPECT_TRUE(at("<schema name=\"s\"><union/></schema>", 1, 18, "empty <union>"));
  EXPECT_TRUE(at("<schema name=\"s\"><doc/></schema>", 1, 18, "unknown element <doc> in a schema"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" cahce=\"false\"/></schema>", 1, 35,
                 "unknown attribute 'cahce' on <module> (it takes: name, cache, pin, ttl)"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" pin=\"yes\"/></schema>", 1, 35,
                 "pin must be \"true\" or \"false\", not \"yes\""));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" cache=\"false\" pin=\"true\"/></schema>", 1, 49,
                 "a module with cache=\"false\" is never stored, so it cannot be pinned"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" ttl=\"soon\"/></schema>", 1, 35,
                 "ttl must be a positive number of seconds, not \"soon\""));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" ttl=\"-5\"/></schema>", 1, 35,
                 "ttl must be a positive number of seconds"));
  EXPECT_TRUE(at("<schema name=\"s\"><module name=\"m\" cache=\"no\"/></schema>", 1, 35,
                 "cache must be \"true\" or \"false\", not \"no\""));
  EXPECT_TRUE(at("<schema name=\"s\"><user><system>x</system></user></schema>", 1, 24,
                 "role tag <system> inside another role tag"));
  EXPECT_TRUE(at("<schema name=\"s\"><user a=\"1\">x</user></schema>", 1, 24, "unknown attribute 'a' on <user> (it takes none)"));
}

class PromptErrors : public ::testing::Test {
 protected:
  WordTokenizer tok;
  Encoder enc{tok, test::word_markers()};
  SchemaLayout L = compile_schema(R"(<schema name="s">
  <module name="a">alpha</module>
  <module name="reply">Reply in <parameter name="lang" length="2"/></module>
  <union>
    <module name="f">formal</module>
    <module name="c">casual</module>
  </union>
  <module name="doc"><module name="ch1">one</module></module>
</schema>)",
                                  enc);
  ::testing::AssertionResult at(const std::string& prompt, int line, int col, const std::string& part) {
    return throws_at([&] { plan_prompt(prompt, L, enc); }, line, col, part);
  }
};

TEST_F(PromptErrors, Each) {
  EXPECT_TRUE(at("<prompt schema=\"s\">\n  <a>\n</prompt>", 3, 3, "malformed XML: Start-end tags mismatch"));
  EXPECT_TRUE(at("<prompt schema=\"t\"><a/></prompt>", 1, 9, "unknown schema 't' (the schema given is 's')"));
  EXPECT_TRUE(at("<prompt>x</prompt>", 1, 1, "<prompt> needs a schema attribute"));
  EXPECT_TRUE(at("<prompt schema=\"s\" layout=\"dense\"/>", 1, 20, "layout must be \"schema\" or \"compact\""));
  EXPECT_TRUE(at("<prompt schema=\"s\" mode=\"x\"/>", 1, 20, "unknown attribute 'mode' on <prompt>"));
  EXPECT_TRUE(at("<prompt schema=\"s\">\n  <b/>\n</prompt>", 2, 3, "unknown module 'b' in schema 's'"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><doc><ch2/></doc></prompt>", 1, 25, "unknown module 'ch2' in module 'doc'"));
  EXPECT_TRUE(at("<prompt schema=\"s\">\n<f/>\n  <c/></prompt>", 3, 3,
                 "modules 'f' (imported at line 2, column 1) and 'c' are members of the same <union>: import one of them"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><a/> and <a/></prompt>", 1, 29, "module 'a' imported twice (first at line 1, column 20)"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><reply lang=\"one two three\"/></prompt>", 1, 27,
                 "argument for parameter 'lang' of module 'reply' is 3 tokens; its slot holds 2"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><reply lang=\"x\" tone=\"y\"/></prompt>", 1, 36,
                 "module 'reply' has no parameter 'tone' (it has: lang)"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><a x=\"1\"/></prompt>", 1, 23, "module 'a' has no parameter 'x' (it has none)"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><module name=\"a\"/></prompt>", 1, 20, "<module> is not allowed in a prompt"));
  EXPECT_TRUE(at("<prompt schema=\"s\"><user><assistant/></user></prompt>", 1, 26, "role tag <assistant> inside another role tag"));
}

TEST_F(PromptErrors, MessageCarriesSourceName) {
  try {
    plan_prompt("<prompt schema=\"s\">\n  <b/>\n</prompt>", L, enc, "ask.pml");
    FAIL() << "no error";
  } catch (const Error& e) {  // a pc::Error, as the CLI and server expect
    EXPECT_STREQ(e.what(), "ask.pml: line 2, column 3: unknown module 'b' in schema 's'");
  }
}

}  // namespace
}  // namespace pc::pml
