// Unit tests of the Jinja language pieces. Expected strings are what Python
// Jinja2 3.1 renders with trim_blocks/lstrip_blocks on (HF settings).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "template/chat_template.h"

namespace {

using nlohmann::json;

std::string render(const std::string& src, const json& vars = json::object(),
                   const json& messages = json::array(), bool agp = false) {
  pc::ChatTemplate t(src);
  return t.apply(messages, agp, vars);
}

std::string error_of(const std::string& src, const json& vars = json::object()) {
  try {
    render(src, vars);
  } catch (const pc::ChatTemplateError& e) {
    return e.what();
  }
  return "<no error>";
}

// ---- whitespace ----

TEST(JinjaWhitespace, TrimBlocksRemovesFirstNewlineAfterBlockTag) {
  EXPECT_EQ(render("{% if true %}\nA\n{% endif %}\nB"), "A\nB");
  EXPECT_EQ(render("{% if true %}\n\nA{% endif %}"), "\nA");
  EXPECT_EQ(render("{% if true %}  \nA{% endif %}"), "  \nA");  // only a newline right after the tag
  EXPECT_EQ(render("{{ 1 }}\n{{ 2 }}"), "1\n2");                 // not after variable tags
}

TEST(JinjaWhitespace, LstripBlocksStripsIndentBeforeBlockTags) {
  EXPECT_EQ(render("a\n    {% if true %}\n    x\n    {% endif %}\nb"), "a\n    x\nb");
  EXPECT_EQ(render("\t{% if true %}\n\tA\n\t{% endif %}\n"), "\tA\n");
  EXPECT_EQ(render("a  {% if true %}x{% endif %}  b"), "a  x  b");  // not at line start
  EXPECT_EQ(render("A\n  {{ 'b' }}  \nC"), "A\n  b  \nC");          // not for variables
  EXPECT_EQ(render("x\n  {# c #}\ny"), "x\ny");                      // comments too
}

TEST(JinjaWhitespace, MinusAndPlusModifiers) {
  EXPECT_EQ(render("  {%- if true -%}  x  {%- endif -%}  "), "x");
  EXPECT_EQ(render("A\n{{- 'b' -}}\n\nC"), "AbC");
  EXPECT_EQ(render("x {%+ if true %}y{% endif %} z\n  {%+ if true %}w{% endif %}"), "x y z\n  w");
  EXPECT_EQ(render("{% if true +%}\nkeep\n{% endif %}"), "\nkeep\n");
  EXPECT_EQ(render("{#- a -#}\n\n  b"), "b");
}

TEST(JinjaWhitespace, NewlinesAndTrailingNewline) {
  EXPECT_EQ(render("a\r\nb\r{{ 'c' }}\n"), "a\nb\nc");
  EXPECT_EQ(render("two\n\n"), "two\n");
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

// ---- control flow and scoping ----

TEST(JinjaLoops, LoopVariables) {
  json msgs = json::parse(R"([{"role":"system"},{"role":"user"},{"role":"assistant"}])");
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }};{% endfor %}",
                   json::object(), msgs),
            "10TrueFalse33;21FalseFalse32;32FalseTrue31;");
  EXPECT_EQ(render("{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }} {% endfor %}",
                   json::object(), msgs),
            "1/2 2/2 ");
  EXPECT_EQ(render("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"), "-2,1-3,2-,");
}

TEST(JinjaLoops, BreakContinueElseRecursive) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "012");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "024");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for a in [[1,2],[3]] recursive %}{% if a is iterable %}[{{ loop(a) }}]"
                   "{% else %}{{ a }}@{{ loop.depth }}{% endif %}{% endfor %}"),
            "[1@22@2][3@2]");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(JinjaScope, SetInsideLoopDoesNotLeakButNamespaceDoes) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"), "1231");
  EXPECT_EQ(render("{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}"
                   "{% endfor %}{{ ns.a }} {{ ns.b }}"),
            "4 x");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.index = 0 %}{% set ns.index = ns.index + 1 %}{{ ns.index }}"),
            "1");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ a }}-{{ b }}"), "1-2");
  EXPECT_EQ(render("{% set s %}inner {{ 1 + 1 }}{% endset %}[{{ s }}]"), "[inner 2]");
  EXPECT_EQ(render("{% with a = 5 %}{{ a }}{% endwith %}[{{ a }}]"), "5[]");
}

TEST(JinjaMacros, ArgumentsDefaultsAndCaller) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Z') }}"),
            "Hi Bob! Hi Al? Hi Z!");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"),
            "1(2, 3){'k': 4}");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body{% endcall %}"), "<body>");
  EXPECT_EQ(render("{% filter upper %}hello {{ 'x' }}{% endfilter %}"), "HELLO X");
}

// ---- expressions ----

TEST(JinjaExpressions, PrintingAndArithmetic) {
  EXPECT_EQ(render("{{ none }} {{ true }} {{ false }} {{ 1.0 }} {{ 1.5e20 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} "
                   "{{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"),
            "None True False 1.0 1.5e+20 0.30000000000000004 2.5 2 -4 2 1024");
  EXPECT_EQ(render("{{ [1, 'a', none, {'k': 'v'}] }} {{ (1,) }} {{ (1, 2) }}"), "[1, 'a', None, {'k': 'v'}] (1,) (1, 2)");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 3 }}"),
            "a1NoneTrue ab [1, 2] ababab");
  EXPECT_EQ(render("{{ 1 if true else 2 }} {{ 1 if false else 2 }} [{{ 1 if false }}]"), "1 2 []");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ true and 'x' }} {{ 0 or 'y' }}"),
            "True False True x y");
  EXPECT_EQ(render("{{ 'x=%s y=%d' % ('a', 3) }} {{ '%.2f' % 3.14159 }} {{ '{} and {x}'.format(1, x='b') }}"),
            "x=a y=3 3.14 1 and b");
  EXPECT_EQ(render("{{ '\\x41\\u00e9\\t|\\'|\"' }} {{ 'a' 'b' }} {{ '\\d' }}"), "A\xc3\xa9\t|'|\" ab \\d");
}

TEST(JinjaExpressions, UndefinedHandling) {
  EXPECT_EQ(render("[{{ x }}] {{ x is defined }} {{ y | default('d') }} {{ '' | default('e', true) }}"),
            "[] False d e");
  EXPECT_EQ(render("{% for i in nothing %}x{% endfor %}{{ nothing | length }}"), "0");
  EXPECT_EQ(render("{{ d.nope }}|{{ d['nope'] }}|{{ d.get('nope', 'G') }}", {{"d", {{"a", 1}}}}), "||G");
  EXPECT_EQ(error_of("{{ x.y }}"), "line 1, column 6: 'x' is undefined");
  EXPECT_EQ(error_of("{{ d.nope.deeper }}", {{"d", {{"a", 1}}}}),
            "line 1, column 11: 'dict object' has no attribute 'nope'");
}

TEST(JinjaExpressions, SlicingAndStringMethods) {
  EXPECT_EQ(render("{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:3] }} {{ 'abcdef'[-2:] }} {{ [1,2,3,4][::2] }} "
                   "{{ 'h\xc3\xa9llo'[1] }}"),
            "fedcba bc ef [1, 3] \xc3\xa9");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
  EXPECT_EQ(render("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('lo','x')) }} {{ 'hello world'.title() }} "
                   "{{ '\\n\\nabc\\n'.lstrip('\\n') }}|{{ 'xxaxx'.strip('x') }}|{{ 'aXb'.replace('X', '--') }}"),
            "True True Hello World abc\n|a|a--b");
  EXPECT_EQ(render("{{ 'Stra\xc3\x9f\x65' | upper }} {{ '\xc3\x80\xc3\x89'.lower() }}"), "STRASSE \xc3\xa0\xc3\xa9");
}

// ---- filters and tests ----

TEST(JinjaFilters, ToJson) {
  json vars = {{"v", {{"a", json::array({1, 2.5, nullptr, true, "\xc3\xa9\"\n"})}}}};
  EXPECT_EQ(render("{{ v | tojson }}", vars), "{\"a\": [1, 2.5, null, true, \"\xc3\xa9\\\"\\n\"]}");
  EXPECT_EQ(render("{{ v | tojson(indent=2) }}", vars),
            "{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    \"\xc3\xa9\\\"\\n\"\n  ]\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [] } | tojson(sort_keys=true, separators=(',', ':')) }}"), "{\"a\":[],\"b\":1}");
  EXPECT_EQ(render("{{ '\xc3\xa9' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
}

TEST(JinjaFilters, Common) {
  json msgs = json::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                              {"role":"user","content":"c"}])");
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('+') }}",
                   json::object(), msgs),
            "a+c");
  EXPECT_EQ(render("{{ messages | rejectattr('role', 'eq', 'user') | list | length }}", json::object(), msgs), "1");
  EXPECT_EQ(render("{{ messages | map(attribute='role') | unique | list }}", json::object(), msgs),
            "['user', 'assistant']");
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'abc' | upper }}|{{ [3,1,2] | sort }}|{{ ['b','A','c'] | sort }}"),
            "x|ABC|[1, 2, 3]|['A', 'b', 'c']");
  EXPECT_EQ(render("{{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.7' | int }} {{ '2.5' | float }} {{ 2.567 | round(2) }}"),
            "43 0 3 2.5 2.57");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }} {{ [1,2,3,4,5] | batch(2) | list }}"),
            "[('a', 2), ('b', 1)] [[1, 2], [3, 4], [5]]");
  EXPECT_EQ(render("{% for k, v in {'x': 1} | items %}{{ k }}{{ v }}{% endfor %}"), "x1");
  EXPECT_EQ(render("{{ ['a', 'b'] | first }}{{ ['a', 'b'] | last }}{{ [1, 2, 3] | sum }}{{ 'x' | string }}"), "ab6x");
}

TEST(JinjaTests, Builtins) {
  EXPECT_EQ(render("{{ 'x' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 5 is iterable }} "
                   "{{ 3 is integer }} {{ true is number }} {{ none is none }} {{ 9 is divisibleby 3 }} "
                   "{{ false is false }} {{ 0 is false }} {{ x is undefined }} {{ 'a' is in 'cat' }}"),
            "True True True False True True True True True False True True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 1 in [1,2] }} {{ 'k' in {'k': 1} }}"),
            "True True True True");
}

TEST(JinjaGlobals, RaiseExceptionAndStrftime) {
  EXPECT_EQ(error_of("{{ raise_exception('boom ' ~ 1) }}"), "boom 1");
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %d %b %Y %A') }}"), "2026-01-02 03:04:05 02 Jan 2026 Friday");
  EXPECT_EQ(render("{{ range(1, 10, 3) | list }} {{ dict(a=1) }}"), "[1, 4, 7] {'a': 1}");
}

// ---- errors and limits ----

TEST(JinjaErrors, SyntaxErrorsCarryLineAndColumn) {
  try {
    pc::ChatTemplate t("line one\n{% if true %}\n  {{ 1 + }}\n{% endif %}");
    FAIL() << "no syntax error";
  } catch (const pc::ChatTemplateError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.column(), 10);
    EXPECT_NE(std::string(e.what()).find("line 3, column 10"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pc::ChatTemplate("{% if true %}unclosed"), pc::ChatTemplateError);
  EXPECT_THROW(pc::ChatTemplate("{% foo %}"), pc::ChatTemplateError);
  EXPECT_THROW(pc::ChatTemplate("{{ 'unterminated }}"), pc::ChatTemplateError);
  EXPECT_THROW(pc::ChatTemplate("{# never closed"), pc::ChatTemplateError);
  EXPECT_THROW(pc::ChatTemplate("{{ (1, }}"), pc::ChatTemplateError);
  EXPECT_THROW(pc::ChatTemplate("{% endfor %}"), pc::ChatTemplateError);
}

TEST(JinjaErrors, RuntimeErrorsAreChatTemplateErrors) {
  EXPECT_EQ(error_of("{{ 1 + 'a' }}"), "line 1, column 6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ [].append(1) }}"), "line 1, column 7: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_NE(error_of("{{ 1 / 0 }}"), "<no error>");
  EXPECT_NE(error_of("{% for x in 5 %}{% endfor %}"), "<no error>");
  EXPECT_NE(error_of("{{ x | nosuchfilter }}"), "<no error>");
}

TEST(JinjaLimits, RecursionLoopsAndSizes) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "<no error>");
  EXPECT_NE(error_of("{{ range(1000000) | length }}"), "<no error>");
  EXPECT_NE(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            "<no error>");
  EXPECT_NE(error_of("{{ 'x' * 1000000000 }}"), "<no error>");
  EXPECT_NE(error_of("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                     "{% set ns.s = ns.s + ns.s %}{% endfor %}"),
            "<no error>");
  EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}"
                     "{% endfor %}"),
            "<no error>");
  std::string deep(5000, '(');
  EXPECT_THROW(pc::ChatTemplate("{{ " + deep + " }}"), pc::ChatTemplateError);
  std::string nested;
  for (int i = 0; i < 500; ++i) nested += "{% if true %}";
  EXPECT_THROW(pc::ChatTemplate{nested}, pc::ChatTemplateError);
}

TEST(JinjaLimits, RandomInputNeverCrashes) {
  std::mt19937 rng(1234);
  const std::string alphabet = "{}%#-+ \n\t()[]'\",.:|~*/abcdefgifnorsetlpx0123456789=<>!_";
  const char* pieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "if ", "for ", "in ", "endif", "endfor", "set ",
                          "macro ", "endmacro", "loop.", "messages", "|tojson", "|trim", " is defined", "namespace(",
                          "raw", "endraw", "else", "elif ", "not ", " and ", "recursive", "break", "-", "+"};
  json msgs = json::parse(R"([{"role":"user","content":"hi"}])");
  for (int iter = 0; iter < 3000; ++iter) {
    std::string src;
    int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 2) src += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
      else src += alphabet[rng() % alphabet.size()];
    }
    try {
      pc::ChatTemplate t(src);
      t.apply(msgs, true);
    } catch (const pc::ChatTemplateError&) {
    }
  }
  SUCCEED();
}

}  // namespace
