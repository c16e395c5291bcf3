// JSON Schema → GBNF (gbnf_parser.h), the subset constrained decoding enforces.
//
// Supported: type (a name or a list), nullable, enum, const, anyOf, oneOf (as
// anyOf: alternatives are not checked for exclusivity), allOf of one schema, $ref to
// "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed; a recursion that can
// never end is an error), properties + required + additionalProperties (false, true
// or a schema; absent means no other properties, which every output of the
// schema's own keys satisfies), items, prefixItems, minItems, maxItems, minLength,
// maxLength, format (date, time, date-time, uuid, email, ipv4), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (number or draft-4 boolean), and annotations
// (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly). Any other keyword is a GrammarError naming it and where it is,
// never ignored.
//
// Output shape: properties in the schema's order; whitespace between tokens is
// optional (one space, or a newline and up to 20 blanks); numbers have at most 16
// integer and 16 fraction digits and exponents of at most 2 digits, and bounded
// numbers no exponent and at most 6 fraction digits (so any value generated
// compares within its bounds as a double); strings use only escapes JSON parsers
// accept (no lone surrogates). The grammar can always finish: a recursion with no
// way out is rejected when the grammar is built.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace pc::grammar {

// The GBNF of a schema; throws GrammarError whose param is the path of the offending
// keyword within the schema ("properties.age.multipleOf").
std::string schema_to_gbnf(const nlohmann::ordered_json& schema);

// The GBNF of any JSON object (response_format json_object).
std::string any_object_gbnf();

}  // namespace pc::grammar
