// Shared fixtures of the model tests: generated models and paths.
#pragma once
#include <string>

#include "gguf/types.h"

namespace pc::test {

std::string shared_model(const std::string& name);  // ../shared/models/<name>
// Generates (once per process) a "tiny"-shape random model of the given arch
// and weight type, with the Llama 2 SentencePiece vocabulary; returns its path.
std::string generated_model(const std::string& arch, GgmlType type);

}  // namespace pc::test
