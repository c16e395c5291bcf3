// GBNF parsing and matching byte strings, with no model: a vocabulary of single
// bytes plus a few multi-byte tokens.
#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/utf8_ranges.h"

namespace pc::grammar {
namespace {

// Tokens: every byte (id = byte), then extras; EOS is the last id (no bytes).
struct ByteVocab {
  std::vector<std::string> pieces;
  int32_t eos;
  explicit ByteVocab(std::vector<std::string> extra = {}) {
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    for (auto& e : extra) pieces.push_back(e);
    eos = int32_t(pieces.size());
    pieces.push_back("");
  }
  std::shared_ptr<const TokenTrie> trie() const { return std::make_shared<TokenTrie>(pieces, std::vector<int32_t>{eos}); }
};

// Whether the grammar accepts `text` completely (byte by byte).
bool accepts(const std::string& gbnf, const std::string& text) {
  ByteVocab v;
  auto a = std::make_shared<Automaton>(parse_gbnf(gbnf), v.trie());
  int32_t s = a->advance(a->start(), text);
  return s != Automaton::kDead && a->complete(s);
}

bool prefix_ok(const std::string& gbnf, const std::string& text) {
  ByteVocab v;
  auto a = std::make_shared<Automaton>(parse_gbnf(gbnf), v.trie());
  return a->advance(a->start(), text) != Automaton::kDead;
}

TEST(Gbnf, LiteralsClassesAndRepetition) {
  const std::string g = R"(root ::= "a" [0-9]+ ("x" | "yz")? "!"{2}  # comment
)";
  EXPECT_TRUE(accepts(g, "a1!!"));
  EXPECT_TRUE(accepts(g, "a123yz!!"));
  EXPECT_TRUE(accepts(g, "a0x!!"));
  EXPECT_FALSE(accepts(g, "a!!"));
  EXPECT_FALSE(accepts(g, "a1!"));
  EXPECT_FALSE(accepts(g, "a1xyz!!"));
  EXPECT_TRUE(prefix_ok(g, "a1y"));
  EXPECT_FALSE(prefix_ok(g, "b"));
}

TEST(Gbnf, BoundedRepetition) {
  const std::string g = "root ::= [a-c]{2,4} \".\"\n";
  EXPECT_FALSE(accepts(g, "a."));
  EXPECT_TRUE(accepts(g, "ab."));
  EXPECT_TRUE(accepts(g, "abca."));
  EXPECT_FALSE(accepts(g, "abcab."));
  EXPECT_TRUE(accepts("root ::= \"x\"{3,}\n", "xxxxxxx"));
  EXPECT_FALSE(accepts("root ::= \"x\"{3,}\n", "xx"));
}

TEST(Gbnf, MultiLineRulesAndGroups) {
  const std::string g = R"(
root ::= item ("," item)*
item ::=
    "a"
  | "b" (
      "c"
      "d"
    )
)";
  EXPECT_TRUE(accepts(g, "a,bcd,a"));
  EXPECT_FALSE(accepts(g, "a,bc"));
}

TEST(Gbnf, UnicodeClassesAreUtf8) {
  const std::string g = "root ::= [^\"\\\\]* \"é\" [\\u4e00-\\u9fff]\n";
  EXPECT_TRUE(accepts(g, "abc\xc3\xa9\xe4\xb8\x80"));         // "abcé一"
  EXPECT_TRUE(accepts(g, "\xf0\x9f\x98\x80\xc3\xa9\xe9\xbf\xbf"));  // "😀é鿿"
  EXPECT_FALSE(accepts(g, "\"\xc3\xa9\xe4\xb8\x80"));
  EXPECT_FALSE(prefix_ok(g, "\xc3\x28"));  // a lead byte without its continuation
  EXPECT_FALSE(prefix_ok(g, "\xed\xa0\x80"));  // a surrogate is never valid UTF-8
  EXPECT_TRUE(accepts("root ::= .\n", "\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(prefix_ok("root ::= .\n", "\xc0\x80"));  // overlong
}

TEST(Utf8Ranges, EveryCodePointRoundTrips) {
  const std::vector<CodeRange> r = normalize({{0x41, 0x5A}, {0x7F0, 0x812}, {0xFFF0, 0x10010}, {0xD700, 0xE010}}, false);
  const auto seqs = utf8_sequences(r);
  auto matches = [&](const std::vector<uint8_t>& bytes) {
    for (const auto& s : seqs) {
      if (s.size() != bytes.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < s.size(); ++i) ok = ok && bytes[i] >= s[i].first && bytes[i] <= s[i].second;
      if (ok) return true;
    }
    return false;
  };
  for (uint32_t cp = 0; cp < 0x10100; ++cp) {
    std::vector<uint8_t> b;
    append_utf8(cp, b);
    bool in = false;
    for (auto [lo, hi] : r) in = in || (cp >= lo && cp <= hi);
    ASSERT_EQ(matches(b), in) << std::hex << cp;
  }
}

TEST(Gbnf, Errors) {
  auto error_of = [](const std::string& g) -> std::string {
    try {
      parse_gbnf(g);
    } catch (const GrammarError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("item ::= \"a\"\n").find("no 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= foo\n").find("'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" root\n").find("can never finish"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"(\" x \")\"\n").find("'x' can never finish"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\n").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("root ::= [b-a]\n").find("out of order"), std::string::npos);
  EXPECT_NE(error_of("root ::= <[12]>\n").find("token references"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"\n").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*\n").find("left-recursive"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"(\" root \")\" | \"x\"\n"), "");  // recursion with a way out
}

// A long chain of rules and deeply nested groups: no recursion proportional to them.
TEST(Gbnf, LongChainsAndDeepNesting) {
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 50000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r50000 ::= \"x\"\n";
  EXPECT_TRUE(accepts(chain, "x"));
  EXPECT_THROW(parse_gbnf("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')') + "\n"), GrammarError);
}

TEST(Matcher, MaskFollowsTheGrammarAndEosOnlyWhenComplete) {
  ByteVocab v({"ab", "abc", "b1", "1", "12", "x"});
  const int32_t ab = 256, abc = 257, b1 = 258, t1 = 259, t12 = 260, x = 261;
  auto a = std::make_shared<Automaton>(parse_gbnf("root ::= \"a\" \"b\"+ [0-9]*\n"), v.trie());
  Matcher m(a);
  auto ok = [&](int32_t id) { return allows(m.allowed(), id); };
  EXPECT_TRUE(ok('a'));
  EXPECT_TRUE(ok(ab));
  EXPECT_FALSE(ok(abc));
  EXPECT_FALSE(ok('b'));
  EXPECT_FALSE(ok(v.eos));
  ASSERT_TRUE(m.accept(ab));
  EXPECT_TRUE(ok('b'));
  EXPECT_TRUE(ok(b1));
  EXPECT_TRUE(ok(t12));
  EXPECT_FALSE(ok(x));
  EXPECT_TRUE(ok(v.eos));  // "ab" is complete
  EXPECT_FALSE(m.accept(x));
  ASSERT_TRUE(m.accept(t1));
  EXPECT_FALSE(ok('b'));
  EXPECT_FALSE(m.finished());
  ASSERT_TRUE(m.accept(v.eos));
  EXPECT_TRUE(m.finished());
}

TEST(Matcher, FinishedWhenNothingCanFollow) {
  ByteVocab v;
  auto a = std::make_shared<Automaton>(parse_gbnf("root ::= \"ok\"\n"), v.trie());
  Matcher m(a);
  ASSERT_TRUE(m.accept('o'));
  EXPECT_FALSE(m.finished());
  ASSERT_TRUE(m.accept('k'));
  EXPECT_TRUE(m.finished());
}

// The mask agrees with checking each token on its own, on a recursive grammar.
TEST(Matcher, MaskEqualsTokenByTokenCheck) {
  ByteVocab v({"[1", "[[", "]]", "1,", ",2]", "]", "[]", "1]]", "12"});
  auto g = parse_gbnf("root ::= list\nlist ::= \"[\" ( item (\",\" item)* )? \"]\"\nitem ::= [0-9]+ | list\n");
  auto a = std::make_shared<Automaton>(g, v.trie());
  const std::vector<std::string> prefixes = {"", "[", "[[", "[1", "[1,", "[[]", "[[1,2],", "[[[]]"};
  for (const auto& p : prefixes) {
    const int32_t s = a->advance(a->start(), p);
    ASSERT_NE(s, Automaton::kDead) << p;
    const auto m = a->mask(s);
    for (int32_t id = 0; id < int32_t(v.pieces.size()); ++id) {
      if (id == v.eos) {
        EXPECT_EQ(allows(m, id), a->complete(s)) << p;
        continue;
      }
      EXPECT_EQ(allows(m, id), a->advance(s, v.pieces[id]) != Automaton::kDead) << p << " + " << v.pieces[id];
    }
  }
}

}  // namespace
}  // namespace pc::grammar
