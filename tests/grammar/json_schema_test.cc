// JSON Schema → grammar: unsupported keywords are errors that name them, a schema
// that can never finish is an error, bounded numbers are exact, and random walks
// through every generated schema's grammar give JSON that validates.
#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/number_range.h"
#include "grammar/response_format.h"
#include "schema_gen.h"
#include "schema_validator.h"

namespace pc::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const TokenTrie> byte_trie(int32_t* eos) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
  for (const char* extra : {"\": ", "\", \"", "true", "null", "{\"", "}, {", "00", "-1"}) pieces.push_back(extra);
  *eos = int32_t(pieces.size());
  pieces.push_back("");
  return std::make_shared<TokenTrie>(pieces, std::vector<int32_t>{*eos});
}

// A uniformly random walk over allowed tokens until the grammar ends.
std::string random_walk(const std::shared_ptr<const Grammar>& g, uint64_t seed, int max_steps = 20000) {
  int32_t eos;
  auto trie = byte_trie(&eos);
  Matcher m(std::make_shared<Automaton>(g, trie));
  std::mt19937_64 rng(seed);
  std::string out;
  for (int step = 0; step < max_steps && !m.finished(); ++step) {
    const auto& mask = m.allowed();
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < trie->n_vocab(); ++id)
      if (allows(mask, id)) ids.push_back(id);
    if (ids.empty()) return out + "<STUCK>";
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    EXPECT_TRUE(m.accept(id));
    if (id != eos) out += trie->piece(id);
  }
  return m.finished() ? out : out + "<UNFINISHED>";
}

std::string error_param(const ojson& schema, std::string* message = nullptr) {
  try {
    from_json_schema(schema);
  } catch (const GrammarError& e) {
    if (message) *message = e.what();
    return e.param;
  }
  return "<no error>";
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  const std::vector<std::pair<ojson, std::string>> cases = {
      {{{"type", "string"}, {"pattern", "^a+$"}}, "pattern"},
      {{{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"multipleOf", 3}}}}}}, "properties.n.multipleOf"},
      {{{"type", "array"}, {"uniqueItems", true}}, "uniqueItems"},
      {{{"not", {{"type", "string"}}}}, "not"},
      {{{"type", "object"}, {"patternProperties", ojson::object()}}, "patternProperties"},
      {{{"if", ojson::object()}, {"then", ojson::object()}}, "if"},
      {{{"type", "string"}, {"format", "hostname"}}, "format"},
      {{{"type", "object"}, {"minProperties", 1}}, "minProperties"},
      {{{"anyOf", {{{"type", "string"}, {"contentEncoding", "base64"}}}}}, "anyOf.0.contentEncoding"},
      {{{"allOf", {{{"type", "string"}}, {{"maxLength", 3}}}}}, "allOf"},
      {{{"$ref", "https://example.com/schema"}}, "$ref"},
  };
  for (const auto& [schema, param] : cases) {
    std::string msg;
    EXPECT_EQ(error_param(schema, &msg), param) << schema.dump();
    const std::string keyword = param.substr(param.rfind('.') == std::string::npos ? 0 : param.rfind('.') + 1);
    EXPECT_NE(msg.find(keyword), std::string::npos) << msg;
  }
  // Through response_format, the param is the path from the format object.
  try {
    from_response_format(nlohmann::json{{"type", "json_schema"},
                                        {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "a"}}}}}});
    ADD_FAILURE() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.param, "json_schema.schema.pattern");
  }
}

TEST(JsonSchema, NeverFinishingSchemaIsAnError) {
  const ojson schema = {
      {"$defs", {{"node", {{"type", "object"}, {"properties", {{"next", {{"$ref", "#/$defs/node"}}}}}, {"required", {"next"}}}}}},
      {"$ref", "#/$defs/node"}};
  std::string msg;
  EXPECT_EQ(error_param(schema, &msg), "");
  EXPECT_NE(msg.find("can never finish"), std::string::npos) << msg;
  // The same with the recursion optional is fine, and a walk through it ends.
  ojson ok = schema;
  ok["$defs"]["node"]["required"] = ojson::array();
  const auto g = from_json_schema(ok);
  const std::string out = random_walk(g, 1);
  EXPECT_TRUE(nlohmann::json::accept(out)) << out;
}

TEST(JsonSchema, BadValuesAreErrors) {
  EXPECT_EQ(error_param({{"type", "strin"}}), "type");
  EXPECT_EQ(error_param({{"type", "string"}, {"minLength", 5}, {"maxLength", 2}}), "maxLength");
  EXPECT_EQ(error_param({{"type", "object"}, {"properties", {{"a", true}}}, {"required", {"b"}}}), "required");
  EXPECT_EQ(error_param({{"type", "integer"}, {"minimum", 5}, {"maximum", 4}}), "maximum");
  EXPECT_EQ(error_param({{"enum", ojson::array()}}), "enum");
  EXPECT_EQ(error_param({{"$ref", "#/$defs/missing"}}), "$ref");
  EXPECT_EQ(error_param(false), "");
}

// Integer ranges accept exactly the integers inside them, in canonical form.
TEST(NumberRange, IntegersExactly) {
  int32_t eos;
  auto trie = byte_trie(&eos);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    NumberBounds b;
    b.lo = int(rng() % 2400) - 1200;
    b.hi = b.lo + int(rng() % 1500);
    b.lo_exclusive = rng() % 2;
    b.hi_exclusive = rng() % 2;
    const std::string expr = integer_range_gbnf(b);
    if (expr.empty()) continue;
    Automaton a(parse_gbnf("root ::= " + expr + "\n"), trie);
    for (int v = -2800; v <= 2800; ++v) {
      const bool in = (b.lo_exclusive ? v > b.lo : v >= b.lo) && (b.hi_exclusive ? v < b.hi : v <= b.hi);
      const int32_t s = a.advance(a.start(), std::to_string(v));
      ASSERT_EQ(s != Automaton::kDead && a.complete(s), in) << expr << " v=" << v;
    }
    EXPECT_EQ(a.advance(a.start(), "007"), Automaton::kDead);
  }
}

// Bounded numbers: every walk's value lies inside the bounds.
TEST(NumberRange, NumbersStayInBounds) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    NumberBounds b;
    b.lo = (int(rng() % 800) - 400) / 8.0;
    b.hi = b.lo + 1 + int(rng() % 400) / 8.0;
    b.lo_exclusive = rng() % 2;
    b.hi_exclusive = rng() % 2;
    const std::string expr = number_range_gbnf(b);
    ASSERT_FALSE(expr.empty());
    const auto g = parse_gbnf("root ::= " + expr + "\n");
    for (int k = 0; k < 20; ++k) {
      const std::string out = random_walk(g, trial * 100 + k);
      const double v = std::stod(out);
      EXPECT_TRUE(b.lo_exclusive ? v > b.lo : v >= b.lo) << out << " lo " << b.lo;
      EXPECT_TRUE(b.hi_exclusive ? v < b.hi : v <= b.hi) << out << " hi " << b.hi;
    }
  }
}

// 300 generated schemas: random walks over a byte vocabulary give JSON that parses
// and validates.
TEST(JsonSchema, RandomWalksValidate) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const ojson schema = test::random_schema(seed);
    const auto g = from_json_schema(schema);
    const std::string out = random_walk(g, seed);
    const nlohmann::json v = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << schema.dump() << "\n" << out;
    const nlohmann::json s = nlohmann::json::parse(schema.dump());
    EXPECT_EQ(test::validate(v, s, s), "") << schema.dump() << "\n" << out;
  }
}

TEST(JsonSchema, JsonObjectModeGivesObjects) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::string out = random_walk(any_json_object(), seed, 400);
    if (out.find("<UNFINISHED>") != std::string::npos) continue;  // the language is infinite
    const nlohmann::json v = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(v.is_object()) << out;
  }
  EXPECT_EQ(from_response_format(nlohmann::json{{"type", "text"}}), nullptr);
}

}  // namespace
}  // namespace pc::grammar

namespace pc::grammar {
namespace {

// Whether `gbnf` accepts `text` completely, byte by byte.
bool accepts_text(const std::string& gbnf, const std::string& text) {
  int32_t eos;
  auto a = std::make_shared<Automaton>(parse_gbnf(gbnf), byte_trie(&eos));
  const int32_t s = a->advance(a->start(), text);
  return s != Automaton::kDead && a->complete(s);
}

// Two documents' schemas in one grammar, each with its own $defs, and JSON strings
// kept from holding the markers that end the text around them.
TEST(JsonSchema, SchemaCompilersShareOneGrammarAndGuardStrings) {
  const ojson a = ojson::parse(R"({"$defs": {"n": {"type": "integer"}}, "type": "object",
      "properties": {"v": {"$ref": "#/$defs/n"}}, "required": ["v"]})");
  const ojson b = ojson::parse(R"({"$defs": {"n": {"type": "string", "maxLength": 3}}, "type": "object",
      "properties": {"v": {"$ref": "#/$defs/n"}, "w": {"type": "string"}}, "required": ["v"]})");
  for (JsonText text : {JsonText::kPlain, JsonText::kHarmony, JsonText::kXml}) {
    SchemaCompiler ca(a, "a-", text), cb(b, "b-", text);
    const std::string ea = ca.value(a, ""), eb = cb.value(b, "");
    const std::string g = "root ::= \"A\" " + ea + " | \"B\" " + eb + "\n" + base_rules(text) + ca.rules() + cb.rules();
    EXPECT_TRUE(accepts_text(g, R"(A{"v": 12})"));
    EXPECT_FALSE(accepts_text(g, R"(A{"v": "12"})"));
    EXPECT_TRUE(accepts_text(g, R"(B{"v": "abc"})"));
    EXPECT_FALSE(accepts_text(g, R"(B{"v": 12})"));
    EXPECT_TRUE(accepts_text(g, R"(B{"v": "", "w": "x<y <\u007c <"})"));
    EXPECT_EQ(accepts_text(g, R"(B{"v": "", "w": "a<|call|>"})"), text != JsonText::kHarmony);
    EXPECT_EQ(accepts_text(g, R"(B{"v": "", "w": "a</parameter>"})"), text != JsonText::kXml);
    EXPECT_EQ(accepts_text(g, R"(B{"v": "", "w": "<parameter="})"), text != JsonText::kXml);
    EXPECT_EQ(accepts_text(g, R"(B{"v": "<", "w": ""})"), text == JsonText::kPlain);  // bounded: no '<'
    EXPECT_TRUE(accepts_text(g, R"(B{"v": "\u003c", "w": "<\/p>"})"));
  }
  EXPECT_EQ(base_rule(JsonText::kXml, "json-value"), "x-json-value");
}

}  // namespace
}  // namespace pc::grammar
