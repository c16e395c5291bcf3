// PML (Prompt Markup Language): the one header the engine, server and CLI need.
//
//   Encoder enc = Encoder::for_model(tokenizer, gguf);         // once per model
//   SchemaLayout s = compile_schema(schema_text, enc, "a.pml"); // once per schema
//   PromptPlan p = plan_prompt(prompt_text, s, enc, "q.pml");  // per request
//   std::string text = describe(s) + describe(p, s);           // pml check
//
// All functions throw PmlError (a pc::Error) naming line and column.
#pragma once
#include "pml/describe.h"
#include "pml/document.h"
#include "pml/encoder.h"
#include "pml/pml_error.h"
#include "pml/layout.h"
#include "pml/plan.h"
#include "pml/role_markers.h"
