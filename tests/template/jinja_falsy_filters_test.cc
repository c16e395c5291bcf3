// select, reject, selectattr, rejectattr and map on none, undefined and other falsy
// values: Jinja2 3.1 runs them only `if value:`, so they give an empty sequence
// instead of an error (the Functionary v3.1 template filters `tools` on every request,
// tools or not). Expected strings are what Python Jinja2 renders.
#include <gtest/gtest.h>

#include <string>

#include "template/chat_template.h"

namespace {

using nlohmann::json;

std::string render(const std::string& src, const json& vars) {
  pc::ChatTemplate t(src);
  return t.apply(json::array(), false, vars);
}

TEST(JinjaFalsyFilters, NoneGivesAnEmptySequence) {
  const json vars = {{"tools", nullptr}};
  EXPECT_EQ(render("{{ tools | select | list }}", vars), "[]");
  EXPECT_EQ(render("{{ tools | reject('none') | list }}", vars), "[]");
  EXPECT_EQ(render("{{ tools | selectattr('type', 'equalto', 'code_interpreter') | list }}", vars), "[]");
  EXPECT_EQ(render("{{ tools | rejectattr('type', 'equalto', 'code_interpreter') | list }}", vars), "[]");
  EXPECT_EQ(render("{{ tools | map(attribute='function') | list }}", vars), "[]");
  EXPECT_EQ(render("{{ tools | map('upper') | list }}", vars), "[]");
  EXPECT_EQ(render("{% for t in tools | selectattr('type') %}x{% endfor %}done", vars), "done");
}

TEST(JinjaFalsyFilters, UndefinedAndEmptyGiveAnEmptySequence) {
  EXPECT_EQ(render("{{ missing | selectattr('type') | list }}", json::object()), "[]");
  EXPECT_EQ(render("{{ missing | rejectattr('type') | list }}", json::object()), "[]");
  EXPECT_EQ(render("{{ missing | map(attribute='a') | list }}", json::object()), "[]");
  EXPECT_EQ(render("{{ s | select | list }}", {{"s", ""}}), "[]");
}

TEST(JinjaFalsyFilters, TruthyValuesAreStillFiltered) {
  const json vars = {{"tools", json::array({{{"type", "function"}}, {{"type", "code_interpreter"}}})}};
  EXPECT_EQ(render("{{ tools | selectattr('type', 'equalto', 'function') | map(attribute='type') | list }}", vars),
            "['function']");
  EXPECT_EQ(render("{{ tools | rejectattr('type', 'equalto', 'function') | map(attribute='type') | join }}", vars),
            "code_interpreter");
}

}  // namespace
