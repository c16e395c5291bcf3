// Random JSON Schemas of the supported subset, for generation tests: objects with
// required and optional properties, arrays, enums, const, nested objects, string
// formats and lengths, bounded integers and numbers, anyOf, nullable, type lists and
// $ref. Every construct is bounded (strings, arrays, nesting), so every schema's
// language is finite and a generation given enough tokens always completes.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

namespace pc::grammar::test {

nlohmann::ordered_json random_schema(uint64_t seed);

}  // namespace pc::grammar::test
