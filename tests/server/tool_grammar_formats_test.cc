// The forced-call grammars of the Qwen3.5 / Qwen3-Coder XML format and gpt-oss harmony
// (tool_grammar_formats.h), with no model: texts the grammar accepts, after the forced
// prefix, parse into calls of an allowed tool whose arguments satisfy its schema (random
// walks of the automaton and hand-written calls), and malformed calls are rejected.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "server/api/api_error.h"
#include "server/chat/tool_calls.h"
#include "server/chat/tool_grammar.h"

namespace pc::test {
namespace {

using ojson = nlohmann::ordered_json;
using server::ToolFormat;

// Tokens: every byte, and EOS (no bytes).
std::shared_ptr<grammar::Automaton> byte_automaton(std::shared_ptr<const grammar::Grammar> g) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
  pieces.push_back("");
  auto trie = std::make_shared<grammar::TokenTrie>(pieces, std::vector<int32_t>{256});
  return std::make_shared<grammar::Automaton>(std::move(g), std::move(trie));
}

bool accepts(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text) {
  auto a = byte_automaton(g);
  const int32_t s = a->advance(a->start(), text);
  return s != grammar::Automaton::kDead && a->complete(s);
}

// A text the grammar accepts, byte by byte at random; "" when none was found in 4096 bytes.
std::string random_walk(grammar::Automaton& a, std::mt19937& rng) {
  std::string out;
  int32_t s = a.start();
  while (out.size() < 4096) {
    if (a.finished(s)) return out;
    std::vector<int> next;
    for (int b = 0; b < 256; ++b)
      if (a.next(s, uint8_t(b)) != grammar::Automaton::kDead) next.push_back(b);
    if (a.complete(s) && (next.empty() || rng() % 4 == 0)) return out;
    if (next.empty()) return "";
    const int b = next[rng() % next.size()];
    out += char(b);
    s = a.next(s, uint8_t(b));
  }
  return "";
}

// Two strict tools whose values are bounded (so random walks end), and a third, not
// strict, that is not offered in a strict-only request.
const char* kTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}, "exact": {"type": "boolean"},
                   "when": {"type": "string", "format": "date"},
                   "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
                   "ratio": {"type": ["number", "null"], "minimum": 0, "maximum": 1}},
    "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "alarm", "strict": true, "parameters": {"type": "object",
    "properties": {"at": {"type": "string", "format": "time"}, "note": {"type": "string"}},
    "required": ["at"]}}}]})";

std::shared_ptr<const server::ToolSchemas> schemas_of(const std::string& body) {
  return std::make_shared<const server::ToolSchemas>(server::tool_schemas(ojson::parse(body)["tools"]));
}

// The arguments satisfy the tool's schema above.
void expect_valid(const std::string& name, const ojson& args, const std::string& text) {
  ASSERT_TRUE(args.is_object()) << text;
  if (name == "get_weather") {
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << text;
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << text;
    EXPECT_TRUE(args["days"].get<int>() >= 1 && args["days"].get<int>() <= 7) << text;
    for (const auto& [k, v] : args.items()) {
      if (k == "unit") EXPECT_TRUE(v == "c" || v == "f") << text;
      else if (k == "exact") EXPECT_TRUE(v.is_boolean()) << text;
      else if (k == "when") EXPECT_TRUE(v.is_string() && v.get<std::string>().size() == 10) << text;
      else if (k == "tags") {
        ASSERT_TRUE(v.is_array() && v.size() <= 2) << text;
        for (const ojson& t : v) EXPECT_TRUE(t.is_string()) << text;
      } else if (k == "ratio") {
        EXPECT_TRUE(v.is_null() || (v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1)) << text;
      } else {
        EXPECT_TRUE(k == "city" || k == "days") << "unknown argument " << k << " in " << text;
      }
    }
  } else {
    ASSERT_EQ(name, "alarm") << text;
    ASSERT_TRUE(args.contains("at") && args["at"].is_string()) << text;
    for (const auto& [k, v] : args.items()) EXPECT_TRUE((k == "at" || k == "note") && v.is_string()) << text;
  }
}

// Random texts of the grammar, after the prefix, parse into one valid call of an allowed tool.
void round_trip(ToolFormat f, const std::string& body, const std::string& name, int walks) {
  auto g = server::forced_call_grammar(f, body, name);
  ASSERT_NE(g, nullptr);
  auto a = byte_automaton(g);
  std::mt19937 rng(7);
  std::set<std::string> seen;
  int done = 0;
  for (int i = 0; i < walks * 4 && done < walks; ++i) {
    const std::string walk = random_walk(*a, rng);
    if (walk.empty()) continue;
    ++done;
    const std::string text = server::forced_call_prefix(f, name) + walk;
    const server::ToolParse p = server::parse_tool_calls(f, text, {}, schemas_of(body));
    ASSERT_EQ(p.calls.size(), 1u) << text;
    EXPECT_EQ(p.content, "") << text;
    if (!name.empty()) { EXPECT_EQ(p.calls[0].name, name) << text; }
    seen.insert(p.calls[0].name);
    expect_valid(p.calls[0].name, ojson::parse(p.calls[0].arguments), text);
  }
  EXPECT_GE(done, walks / 2);
  if (name.empty()) { EXPECT_EQ(seen.size(), 2u); }  // both tools came up
}

TEST(ToolGrammarFormats, XmlRandomCallsParseIntoValidArguments) {
  round_trip(ToolFormat::kQwenXml, kTools, "", 60);
  round_trip(ToolFormat::kQwenXml, kTools, "get_weather", 30);
}

TEST(ToolGrammarFormats, HarmonyRandomCallsParseIntoValidArguments) {
  round_trip(ToolFormat::kHarmony, kTools, "", 60);
  round_trip(ToolFormat::kHarmony, kTools, "alarm", 30);
}

TEST(ToolGrammarFormats, XmlAcceptsWellFormedCallsAndRejectsMalformedOnes) {
  auto any = server::forced_call_grammar(ToolFormat::kQwenXml, kTools, "");
  auto named = server::forced_call_grammar(ToolFormat::kQwenXml, kTools, "get_weather");
  ASSERT_TRUE(any && named);
  auto param = [](const std::string& k, const std::string& v) { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n"; };
  const std::string end = "</function>\n</tool_call>";
  const std::string good = param("city", "Kyoto") + param("unit", "c") + param("days", "3") + param("exact", "true") +
                           param("tags", "[\"a\", \"bc\"]") + param("ratio", "0.5") + end;
  EXPECT_TRUE(accepts(named, good));
  EXPECT_TRUE(accepts(any, "get_weather>\n" + good));
  EXPECT_TRUE(accepts(any, "alarm>\n" + param("at", "07:30:00Z") + param("note", "a <b> </x> <q\nline") + end));
  // The accepted text parses into the call.
  const server::ToolParse p = server::parse_tool_calls(
      ToolFormat::kQwenXml, server::forced_call_prefix(ToolFormat::kQwenXml, "get_weather") + good, {}, schemas_of(kTools));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(ojson::parse(p.calls[0].arguments),
            ojson::parse(R"({"city": "Kyoto", "unit": "c", "days": 3, "exact": true, "tags": ["a", "bc"], "ratio": 0.5})"));
  for (const std::string& bad : {
           "get_time>\n" + param("city", "Kyoto") + param("days", "3") + end,        // a tool not offered
           "get_weather>\n" + param("city", "Kyoto") + end,                          // required days missing
           "get_weather>\n" + param("city", "Kyoto") + param("days", "three") + end,  // not an integer
           "get_weather>\n" + param("city", "Kyoto") + param("days", "9") + end,      // out of range
           "get_weather>\n" + param("city", "Kyoto") + param("days", "3") + param("wind", "5") + end,  // unknown
           "get_weather>\n" + param("days", "3") + param("city", "Kyoto") + end,      // not in the schema's order
           "get_weather>\n" + param("city", "Kyoto") + param("unit", "k") + param("days", "3") + end,  // not in enum
           "get_weather>\n" + param("city", "Kyoto Bay!") + param("days", "3") + end,  // over maxLength
           "get_weather>\n" + param("city", "Kyoto") + param("days", "3") + param("exact", "yes") + end,
           "alarm>\n" + param("at", "7 am") + end,                                     // not a time
           "alarm>\n" + param("at", "07:30:00Z") + param("note", "x</parameter>") + end,  // ends the value early
           "alarm>\n" + param("at", "07:30:00Z") + param("note", "<parameter=y>") + end,
           "alarm>\n" + param("at", "07:30:00Z"),                                      // no end
       })
    EXPECT_FALSE(accepts(any, bad)) << bad;
  EXPECT_FALSE(accepts(named, "alarm>\n" + param("at", "07:30:00Z") + end));
}

TEST(ToolGrammarFormats, HarmonyAcceptsWellFormedCallsAndRejectsMalformedOnes) {
  auto any = server::forced_call_grammar(ToolFormat::kHarmony, kTools, "");
  auto named = server::forced_call_grammar(ToolFormat::kHarmony, kTools, "get_weather");
  ASSERT_TRUE(any && named);
  const std::string head = "get_weather <|constrain|>json<|message|>";
  const std::string args = R"({"city": "Oslo", "days": 2, "tags": ["ab"]})";
  EXPECT_TRUE(accepts(named, args));
  EXPECT_TRUE(accepts(any, head + args));
  EXPECT_TRUE(accepts(any, R"(alarm <|constrain|>json<|message|>{"at": "23:59:59+01:00", "note": "x<y <\u007c <"})"));
  const server::ToolParse p = server::parse_tool_calls(
      ToolFormat::kHarmony, server::forced_call_prefix(ToolFormat::kHarmony, "") + head + args, {}, schemas_of(kTools));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(ojson::parse(p.calls[0].arguments), ojson::parse(args));
  for (const std::string& bad : {
           std::string(R"(get_time <|constrain|>json<|message|>{"city": "Oslo", "days": 2})"),  // not offered
           head + R"({"city": "Oslo"})",                                 // required days missing
           head + R"({"city": "Oslo", "days": "2"})",                    // a string, not an integer
           head + R"({"city": 5, "days": 2})",                           // not a string
           head + R"({"city": "Oslo", "days": 2, "wind": 3})",           // unknown
           std::string("get_weather<|message|>") + args,                 // no <|constrain|>json
           std::string(R"(alarm <|constrain|>json<|message|>{"at": "07:00:00Z", "note": "a<|call|>"})"),  // a marker
           head + R"({"city": "Oslo", "days": 2)",                       // unfinished
       })
    EXPECT_FALSE(accepts(any, bad)) << bad;
  EXPECT_FALSE(accepts(named, R"({"at": "07:00:00Z"})"));
}

TEST(ToolGrammarFormats, OnlyStrictToolsAreConstrained) {
  const std::string loose = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"n": {"type": "integer"}}}}}]})";
  for (ToolFormat f : {ToolFormat::kQwenXml, ToolFormat::kHarmony}) {
    EXPECT_EQ(server::forced_call_grammar(f, loose, ""), nullptr);
    EXPECT_EQ(server::forced_call_grammar(f, loose, "f"), nullptr);
  }
  // Beside a strict tool, a loose one is an alternative with any arguments.
  const std::string mixed = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"n": {"type": "integer"}}}}},
      {"type": "function", "function": {"name": "g", "strict": true, "parameters":
      {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]})";
  auto xml = server::forced_call_grammar(ToolFormat::kQwenXml, mixed, "");
  ASSERT_NE(xml, nullptr);
  EXPECT_TRUE(accepts(xml, "f>\n<parameter=anything>\nx y\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_TRUE(accepts(xml, "f>\n</function>\n</tool_call>"));
  EXPECT_TRUE(accepts(xml, "g>\n<parameter=n>\n-4\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml, "g>\n<parameter=n>\nx\n</parameter>\n</function>\n</tool_call>"));
  auto harmony = server::forced_call_grammar(ToolFormat::kHarmony, mixed, "");
  ASSERT_NE(harmony, nullptr);
  EXPECT_TRUE(accepts(harmony, R"(f <|constrain|>json<|message|>{"n": "x", "m": [1]})"));
  EXPECT_FALSE(accepts(harmony, R"(g <|constrain|>json<|message|>{"n": "x"})"));
}

// XML values by the type the parser converts to: a $ref followed, a list of types cut
// to its first, an untyped anyOf written as its string alternatives.
TEST(ToolGrammarFormats, XmlValuesFollowTheParsersTypes) {
  const std::string body = R"({"tools": [{"type": "function", "function": {"name": "f", "strict": true, "parameters":
      {"type": "object", "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
       "properties": {"p": {"$ref": "#/$defs/pt"}, "k": {"type": ["integer", "boolean"]},
                      "s": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]}},
       "required": ["p", "k", "s"]}}}]})";
  auto g = server::forced_call_grammar(ToolFormat::kQwenXml, body, "f");
  ASSERT_NE(g, nullptr);
  auto param = [](const std::string& k, const std::string& v) { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n"; };
  const std::string end = "</function>\n</tool_call>";
  const std::string good = param("p", "{\"x\": 1}") + param("k", "5") + param("s", "ab") + end;
  EXPECT_TRUE(accepts(g, good));
  const server::ToolParse p = server::parse_tool_calls(
      ToolFormat::kQwenXml, server::forced_call_prefix(ToolFormat::kQwenXml, "f") + good, {}, schemas_of(body));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(ojson::parse(p.calls[0].arguments), ojson::parse(R"({"p": {"x": 1}, "k": 5, "s": "ab"})"));
  EXPECT_FALSE(accepts(g, param("p", "{\"x\": 1}") + param("k", "true") + param("s", "ab") + end));  // parsed as text
  EXPECT_FALSE(accepts(g, param("p", "{}") + param("k", "5") + param("s", "ab") + end));
  EXPECT_FALSE(accepts(g, param("p", "{\"x\": 1}") + param("k", "5") + param("s", "abc") + end));
}

// Schemas a format cannot enforce are 400s naming the keyword, as for the JSON formats.
TEST(ToolGrammarFormats, UnenforceableSchemasAre400sNamingThem) {
  auto param_of = [](ToolFormat f, const std::string& body, const std::string& name) -> std::string {
    try {
      server::forced_call_grammar(f, body, name);
    } catch (const server::ApiError& e) {
      EXPECT_EQ(e.status, 400);
      return e.param;
    }
    return "(no error)";
  };
  const std::string pattern = R"({"tools": [{"type": "function", "function": {"name": "f", "strict": true,
      "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}}}}]})";
  for (ToolFormat f : {ToolFormat::kQwenXml, ToolFormat::kHarmony})
    for (const char* name : {"", "f"})
      EXPECT_EQ(param_of(f, pattern, name), "tools[0].function.parameters.properties.s.pattern");
  const std::string untyped_numbers = R"({"tools": [{"type": "function", "function": {"name": "f", "strict": true,
      "parameters": {"type": "object", "properties": {"n": {"enum": [1, 2]}}}}}]})";
  EXPECT_EQ(param_of(ToolFormat::kQwenXml, untyped_numbers, ""), "tools[0].function.parameters.properties.n.enum");
  EXPECT_NE(server::forced_call_grammar(ToolFormat::kHarmony, untyped_numbers, ""), nullptr);
  const std::string not_object = R"({"tools": [{"type": "function", "function": {"name": "f", "strict": true,
      "parameters": {"anyOf": [{"type": "object"}]}}}]})";
  EXPECT_EQ(param_of(ToolFormat::kQwenXml, not_object, "f"), "tools[0].function.parameters.anyOf");
}

}  // namespace
}  // namespace pc::test
