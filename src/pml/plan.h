// A prompt resolved against its schema: the execution plan the engine runs.
//
// The plan is the ordered list of what the sequence's page table will hold.
// Items are either a cached module (its pages are referenced, not copied) or a
// run of uncached tokens to compute. Computed tokens attend to everything
// before them in plan order; a module's own KV attends only to its context
// (ModuleLayout::context) and itself, whatever comes before it in the plan.
//
// Order: the root module first, then the prompt in document order — an import
// becomes its module item followed by one item per argument; text and role
// markers become uncached token items (adjacent ones merged).
//
// Positions (LayoutMode):
//   kSchema   modules at their schema positions; arguments at their slot's
//             positions; other uncached tokens from SchemaLayout::length onward,
//             in prompt order. (The paper's semantics.)
//   kCompact  every item laid out contiguously from 0 in plan order; each span
//             records the schema position its KV was computed at (schema_pos)
//             and the position it takes here (pos), so cached K can be
//             RoPE-rotated by (pos - schema_pos).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "pml/document.h"
#include "pml/layout.h"

namespace pc::pml {

class Encoder;

// n = end - begin tokens, consecutive in both position spaces:
//   token begin + k sits at schema position schema_pos + k and plan position pos + k.
struct PlanSpan {
  int32_t begin = 0, end = 0;  // kModule: indices into the module's tokens; kTokens: into item.tokens
  int32_t schema_pos = 0;      // where its KV is (kModule) / would be (kTokens) in schema layout
  int32_t pos = 0;             // position in this plan
};

struct PlanItem {
  enum class Kind { kModule, kTokens };
  Kind kind = Kind::kTokens;
  // kModule: the module (index into SchemaLayout::modules).
  // kTokens: for an argument, the module whose slot it fills; -1 for prompt text.
  int module = -1;
  int param = -1;            // kTokens argument: index into modules[module].params; else -1
  bool cache = true;         // kModule: the module's cache flag
  std::vector<int32_t> tokens;  // kTokens: the ids to compute (kModule: empty, see the layout)
  // kModule: the module's own tokens included, in order: all of them except
  // the placeholders of slots that arguments fill, split where positions jump.
  // kTokens: one span over `tokens`.
  std::vector<PlanSpan> spans;
  Loc loc;                   // the import element / text in the prompt (root item: none)

  int32_t n_tokens() const;
  bool is_argument() const { return kind == Kind::kTokens && param >= 0; }
};

struct PromptPlan {
  std::string schema;
  std::string source;
  LayoutMode layout = LayoutMode::kSchema;
  std::vector<PlanItem> items;
  std::vector<int> modules;        // modules in the plan, in plan order, root first
  int32_t n_module_tokens = 0;     // tokens in kModule items (cacheable)
  int32_t n_computed_tokens = 0;   // tokens in kTokens items (always computed)
  int32_t next_pos = 0;            // position of the first generated token
  int32_t n_tokens() const { return n_module_tokens + n_computed_tokens; }
};

// Throws PmlError: unknown schema (doc.schema != schema.name), unknown module,
// a module imported twice, two members of one union, unknown parameter,
// argument longer than its slot.
PromptPlan plan_prompt(const PromptDoc& doc, const SchemaLayout& schema, const Encoder& enc);
// parse_prompt + plan_prompt.
PromptPlan plan_prompt(std::string_view text, const SchemaLayout& schema, const Encoder& enc,
                       std::string_view source = "");
// Looks the schema up by the prompt's schema attribute; find returns nullptr
// for an unknown name (→ PmlError at the attribute).
using SchemaLookup = std::function<const SchemaLayout*(std::string_view name)>;
PromptPlan plan_prompt(std::string_view text, const SchemaLookup& find, const Encoder& enc,
                       std::string_view source = "");

// A plan's tokens in plan order (module spans and uncached text): the prompt that full
// recomputation of the same text computes, at positions 0..n-1.
std::vector<int32_t> plan_tokens(const PromptPlan& plan, const SchemaLayout& schema);

}  // namespace pc::pml
