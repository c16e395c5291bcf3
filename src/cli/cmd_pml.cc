// `promptcache pml check`: a schema's layout and a prompt's execution plan.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "model/model.h"
#include "pml/pml.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

struct PmlArgs {
  std::string model, schema, prompt;
};

int run_check(const PmlArgs& a) {
  auto model = Model::load(a.model);
  const pml::Encoder enc = pml::Encoder::for_model(model->tokenizer(), model->file());
  const pml::SchemaLayout layout = pml::compile_schema(read_text_file(a.schema), enc, a.schema);
  std::fputs(pml::describe(layout, &model->tokenizer()).c_str(), stdout);
  if (!a.prompt.empty()) {
    const pml::PromptPlan plan = pml::plan_prompt(read_text_file(a.prompt), layout, enc, a.prompt);
    std::fputs("\n", stdout);
    std::fputs(pml::describe(plan, layout, &model->tokenizer()).c_str(), stdout);
  }
  return 0;
}

}  // namespace

Run add_pml(CLI::App& app) {
  app.require_subcommand(1);
  auto a = std::make_shared<PmlArgs>();
  CLI::App* c = app.add_subcommand("check", "Print a schema's layout (positions and token counts of "
                                             "every module) and a prompt's execution plan");
  c->add_option("schema", a->schema, "PML schema file")->required()->check(CLI::ExistingFile);
  c->add_option("prompt", a->prompt, "PML prompt file")->check(CLI::ExistingFile);
  c->add_option("-m,--model", a->model, "GGUF model (its tokenizer and chat markers lay the schema out)")
      ->required()->check(CLI::ExistingFile);
  return [a] { return run_check(*a); };
}

}  // namespace pc::cli
