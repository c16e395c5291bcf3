// The syntax tree of PML schemas and prompts, after the whitespace rules and
// every check that needs no tokenizer. Layout (layout.h) and planning (plan.h)
// turn it into positions and tokens.
//
// Whitespace rules (docs/pml.md "Text and whitespace"): text is cut into
// segments at block boundaries — the start and end of <schema>, <prompt>,
// <module>, <union>, role tags and imports. Each segment is trimmed of leading
// and trailing whitespace; whitespace-only segments vanish. A <parameter> is
// inline: it does not cut a segment, so whitespace around it is kept.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "pml/pml_error.h"

namespace pc::pml {

enum class Role { kSystem, kUser, kAssistant };
const char* role_name(Role r);  // "system", "user", "assistant"

// One node of a schema or prompt.
//
//   kind      schema                        prompt
//   kText     text (verbatim after trimming) text
//   kRole     role tag; children            role tag; children
//   kModule   <module name cache>; children  —
//   kUnion    <union>; children are kModule  —
//   kParam    <parameter name length>        —
//   kImport   —                              <NAME arg="..."/>; children
struct Node {
  enum class Kind { kText, kRole, kModule, kUnion, kParam, kImport };
  Kind kind = Kind::kText;
  Loc loc;                    // the element's '<' (text: its first character)
  std::string text;           // kText
  Role role = Role::kUser;    // kRole
  std::string name;           // kModule, kParam, kImport
  bool cache = true;          // kModule: cache="false" → computed in every request
  bool pin = false;           // kModule: pin="true" → its KV is never evicted from memory
  double ttl_seconds = 0;     // kModule: ttl="S" → its KV is dropped S seconds after encoding (0: none)
  int length = 0;             // kParam: reserved positions (> 0)
  std::string placeholder;    // kParam: text encoded in the slot when no argument is given
  struct Arg {
    std::string name, value;
    Loc loc;                  // the attribute's name
  };
  std::vector<Arg> args;      // kImport, in document order
  std::vector<Node> children;
};

struct SchemaDoc {
  std::string source;         // file name or label used in error messages
  std::string name;           // <schema name="...">
  Loc loc;
  std::vector<Node> body;     // children of <schema>
};

enum class LayoutMode { kSchema, kCompact };

struct PromptDoc {
  std::string source;
  std::string schema;         // <prompt schema="...">
  Loc loc, schema_loc;        // the <prompt> element; its schema attribute
  LayoutMode layout = LayoutMode::kSchema;  // layout="schema" (default) | "compact"
  std::vector<Node> body;
};

// Elements of a schema or prompt nest at most this deep, the outer <schema> or
// <prompt> counted (docs/pml.md "Limits").
inline constexpr int kMaxNesting = 64;

// Throw PmlError for malformed XML, elements nested deeper than kMaxNesting, unknown elements or attributes, missing or
// invalid names and lengths, duplicate module names in one scope, duplicate
// parameter names in one module, text or parameters where they cannot be.
SchemaDoc parse_schema(std::string_view text, std::string_view source = "");
PromptDoc parse_prompt(std::string_view text, std::string_view source = "");

}  // namespace pc::pml
