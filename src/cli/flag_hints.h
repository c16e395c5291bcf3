// Command-line habits brought from llama.cpp: its spellings that CLI11 cannot take as
// they are, and hints for a flag no command has.
#pragma once
#include <string>
#include <vector>

namespace CLI { class App; }

namespace pc::cli {

// argv with llama.cpp's multi-letter short flags rewritten to ours (-np → --parallel).
// Throws pc::Error for a flag that asks for what promptcache does not have
// (-ngl / --n-gpu-layers: there is no GPU support).
std::vector<std::string> translate_llama_flags(int argc, char** argv);

// After CLI11 rejected arguments it did not expect: a line per unknown flag naming the
// closest flags of the command that was parsed ("did you mean --ctx-size?"); "" when
// nothing is close.
std::string flag_hints(const CLI::App& app);

// Edit distance (insertions, deletions, substitutions) between two ASCII strings.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace pc::cli
