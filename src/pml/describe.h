// Human-readable layouts and plans: what `promptcache pml check SCHEMA [PROMPT]`
// prints. Position ranges are half-open, [start, end).
#pragma once
#include <string>

#include "pml/layout.h"
#include "pml/plan.h"

namespace pc {
class Tokenizer;
}

namespace pc::pml {

// One line per module (indented by nesting) and union: positions, length,
// token count, parameter slots, flags. With a tokenizer, also each module's
// text (abbreviated).
std::string describe(const SchemaLayout& layout, const Tokenizer* tok = nullptr);
// One line per plan item: kind, module or argument, token count, positions
// (in compact layout: "[pos) <- [schema_pos)" where they differ). With a
// tokenizer, computed items show their text (abbreviated).
std::string describe(const PromptPlan& plan, const SchemaLayout& layout, const Tokenizer* tok = nullptr);

}  // namespace pc::pml
