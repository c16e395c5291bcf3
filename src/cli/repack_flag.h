// --repack MODE and --no-repack: which weight matrices are repacked at load
// (Model::WeightLayout), one pair of flags for every command that loads a model
// to run it (serve, generate, bench prefill).
#pragma once
#include "model/model.h"

namespace CLI { class App; }

namespace pc::cli {

// What --help says of --repack.
inline constexpr const char* kRepackHelp =
    "Which weight matrices are repacked at load into the kernels' layouts of 16 interleaved rows "
    "(the results are the same, bit for bit): auto repacks a type where a request of 512 prompt "
    "and 128 generated tokens runs faster repacked on this CPU (always with AVX-512; with AVX2 each "
    "type with 32 MiB of weights or more is timed once at startup, decode and a prompt batch, both "
    "layouts alternating, 0.15-0.4 s a type); all repacks every type the kernels have a layout for "
    "(on some AVX2 CPUs prompts run faster that way while replies decode slower); none keeps the "
    "file's layout";

// Adds --repack (auto, all, none) and --no-repack (= --repack none, llama-server's
// flag) to app, parsed into *out; an unknown mode is an error naming the flag.
void add_repack_options(CLI::App& app, Model::WeightLayout* out);

}  // namespace pc::cli
