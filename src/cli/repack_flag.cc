#include "cli/repack_flag.h"

#include <CLI/CLI.hpp>

namespace pc::cli {

void add_repack_options(CLI::App& app, Model::WeightLayout* out) {
  app.add_option_function<std::string>(
         "--repack",
         [out](const std::string& v) {
           if (!Model::weight_layout_from_name(v, out))
             throw CLI::ValidationError("--repack", "unknown mode '" + v + "' (expected auto, all or none)");
         },
         kRepackHelp)
      ->default_str("auto");
  app.add_flag_callback("--no-repack", [out] { *out = Model::WeightLayout::kAsStored; },
                        "Keep the weight matrices in the file's layout (--repack none; llama-server's --no-repack)");
}

}  // namespace pc::cli
