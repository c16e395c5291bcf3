// `promptcache inspect`: print a GGUF file's metadata and tensor table.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/units.h"
#include "gguf/gguf.h"

namespace pc::cli {

namespace {

int run_inspect(const std::string& path, bool all_values) {
  auto f = GgufFile::open(path);
  std::printf("file: %s\nGGUF version %u, %zu metadata keys, %zu tensors, alignment %llu, %s\n\n",
              path.c_str(), f->version(), f->metadata().size(), f->tensors().size(),
              (unsigned long long)f->alignment(), format_bytes(int64_t(f->file_size())).c_str());
  std::printf("metadata:\n");
  for (const auto& [key, value] : f->metadata())
    std::printf("  %-44s %s\n", key.c_str(), value.to_string(all_values ? SIZE_MAX : 8).c_str());
  std::printf("\ntensors:\n");
  uint64_t total = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    std::string shape;
    for (size_t i = 0; i < t.ne.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.ne[i]);
    std::printf("  %-36s %-6s %-18s %s\n", t.name.c_str(), ggml_type_name(t.type).c_str(),
                shape.c_str(), format_bytes(int64_t(t.nbytes)).c_str());
    total += t.nbytes;
  }
  std::printf("\ntensor data: %s\n", format_bytes(int64_t(total)).c_str());
  return 0;
}

}  // namespace

Run add_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  app.add_option("model", *path, "GGUF file")->required()->check(CLI::ExistingFile);
  app.add_flag("--all", *all, "Print arrays in full");
  return [path, all] { return run_inspect(*path, *all); };
}

}  // namespace pc::cli
