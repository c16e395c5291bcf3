#include "cli/kv_type_flag.h"

#include <CLI/CLI.hpp>

namespace pc::cli {

namespace {

KvType parse_or_throw(const std::string& v) {
  const std::optional<KvType> t = parse_kv_type(v);
  if (!t) throw CLI::ValidationError("--kv-type", "unknown KV type '" + v + "' (expected one of " + kKvTypeNames + ")");
  return *t;
}

}  // namespace

void add_kv_type_option(CLI::App& app, KvType* out) {
  app.add_option_function<std::string>("--kv-type", [out](const std::string& v) { *out = parse_or_throw(v); },
                                        kKvTypeHelp)
      ->default_str(kv_type_name(*out));
}

void add_kv_types_option(CLI::App& app, std::vector<KvType>* out) {
  app.add_option_function<std::vector<std::string>>(
         "--kv-type",
         [out](const std::vector<std::string>& vs) {
           out->clear();
           for (const std::string& v : vs) out->push_back(parse_or_throw(v));
         },
         std::string(kKvTypeHelp) + " (several: run side by side, each length printing every type's medians of --repeat and their ratio to the first type's)")
      ->delimiter(',')
      ->default_str("f16");
}

}  // namespace pc::cli
