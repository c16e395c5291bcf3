// Reference renderings (../shared/templates-2026/expected) of Python Jinja2 with
// Hugging Face's apply_chat_template settings must be matched byte for byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "test_util.h"

namespace {

// Ordered: a case's objects reach the template with their keys as cases.json has them.
using json = nlohmann::ordered_json;

using pc::test::read_file;

std::string templates_dir() { return pc::test::shared_dir() + "/templates-2026"; }

struct RefCase {
  std::string tmpl;
  std::string name;
  std::string status;
  std::string expected;
};

std::vector<RefCase> load_index() {
  std::vector<RefCase> out;
  try {
    json idx = json::parse(read_file(templates_dir() + "/expected/index.json"));
    for (const auto& e : idx)
      out.push_back({e.at("template").get<std::string>(), e.at("case").get<std::string>(),
                     e.at("status").get<std::string>(), e.at("expected").get<std::string>()});
  } catch (const std::exception&) {
  }
  return out;
}

class ReferenceRendering : public ::testing::TestWithParam<RefCase> {};

TEST_P(ReferenceRendering, MatchesPythonJinja) {
  const RefCase& rc = GetParam();
  json cases = json::parse(read_file(templates_dir() + "/cases.json"));
  json args;
  for (const auto& c : cases)
    if (c.at("name") == rc.name) args = c.at("args");
  ASSERT_FALSE(args.is_null()) << "case " << rc.name << " not in cases.json";
  json extra = json::object();
  for (auto it = args.begin(); it != args.end(); ++it)
    if (it.key() != "messages" && it.key() != "add_generation_prompt") extra[it.key()] = it.value();
  bool agp = args.value("add_generation_prompt", false);

  pc::ChatTemplate tmpl(read_file(templates_dir() + "/" + rc.tmpl));
  std::string expected = read_file(templates_dir() + "/expected/" + rc.expected);
  if (rc.status == "ok") {
    std::string got;
    ASSERT_NO_THROW(got = tmpl.apply(args.at("messages"), agp, extra));
    EXPECT_EQ(got, expected);
  } else {
    try {
      tmpl.apply(args.at("messages"), agp, extra);
      FAIL() << "expected the template to raise: " << expected;
    } catch (const pc::ChatTemplateError& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<RefCase>& info) {
  std::string n = info.param.tmpl + "__" + info.param.name;
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Templates, ReferenceRendering, ::testing::ValuesIn(load_index()), case_name);

TEST(ReferenceIndex, HasAllRenderings) { EXPECT_EQ(load_index().size(), 96u); }

}  // namespace
