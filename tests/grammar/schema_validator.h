// A JSON Schema validator for the subset the grammar compiler supports, written
// apart from the compiler (regular expressions for formats, plain comparisons for
// bounds) so that the tests check the compiler's output against a second reading of
// the schema.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace pc::grammar::test {

// "" when `v` satisfies `schema` (whose $defs `root` holds), else why not.
std::string validate(const nlohmann::json& v, const nlohmann::json& schema, const nlohmann::json& root);

}  // namespace pc::grammar::test
