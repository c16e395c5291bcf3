// A PML prompt compiled into the engine's assembly plan (kv/kv_plan.h).
//
//   ModuleSet specs = module_set(schema)      once per schema: every module's tokens,
//                                             positions, segments, context, policy
//   KvPlan p = kv_plan(prompt_plan, specs)    per request
//
// The module set's indices are the schema's module indices. A plan item of kind
// kModule becomes kModule spans over whole segments (in compact layout each with the
// shift from its schema position to its plan position); uncached text and arguments
// become kCompute spans at their plan positions.
#pragma once
#include <memory>

#include "kv/kv_plan.h"
#include "pml/layout.h"
#include "pml/plan.h"

namespace pc::pml {

std::shared_ptr<const ModuleSet> module_set(const SchemaLayout& schema);
// Throws PmlError when the prompt has no tokens or ends with an import (the last
// token must be computed to produce logits).
KvPlan kv_plan(const PromptPlan& plan, std::shared_ptr<const ModuleSet> modules);
// Both at once, for one-off callers.
KvPlan kv_plan(const PromptPlan& plan, const SchemaLayout& schema);

}  // namespace pc::pml
