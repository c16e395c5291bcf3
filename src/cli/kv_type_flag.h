// --kv-type: how KV pages store K and V (kernels/kv_quant.h), one flag for every
// command that builds an engine.
#pragma once
#include <string>
#include <vector>

#include "kernels/kv_quant.h"

namespace CLI { class App; }

namespace pc::cli {

// What --help says of --kv-type.
inline constexpr const char* kKvTypeHelp =
    "How the KV cache stores keys and values: f16 (2 bytes a value), q8_0 (8-bit, "
    "34 bytes per 32 values: about twice the tokens in the same --kv-memory) or q4_0 "
    "(4-bit, 18 bytes per 32). Cached reuse is exact within a type; types never share entries";

// Adds --kv-type to app, parsed into *out; an unknown name is an error naming the flag.
void add_kv_type_option(CLI::App& app, KvType* out);
// The same, taking several types (comma- or space-separated): benchmarks run them side by side.
void add_kv_types_option(CLI::App& app, std::vector<KvType>* out);

}  // namespace pc::cli
