#include "cli/flag_hints.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace pc::cli {

namespace {

bool is_flag(const std::string& arg, const char* name) {
  return arg == name || arg.rfind(std::string(name) + "=", 0) == 0;
}

// The innermost parsed command with arguments left over.
const CLI::App* command_with_extras(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands())
    if (const CLI::App* found = command_with_extras(*sub)) return found;
  return app.remaining_size() > 0 ? &app : nullptr;
}

// "--ctx" → "ctx"; "-x" → "x"; the part before '='.
std::string bare(const std::string& arg) {
  const size_t start = arg.find_first_not_of('-');
  if (start == std::string::npos) return "";
  const std::string s = arg.substr(start);
  return s.substr(0, s.find('='));
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> translate_llama_flags(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (is_flag(arg, "-ngl") || is_flag(arg, "--n-gpu-layers") || is_flag(arg, "--gpu-layers"))
      throw Error(arg.substr(0, arg.find('=')) +
                  ": promptcache has no GPU support yet; it runs every layer on the CPU (drop the "
                  "flag; -t/--threads sets the CPU threads)");
    if (is_flag(arg, "-np")) arg = "--parallel" + arg.substr(3);
    out.push_back(std::move(arg));
  }
  return out;
}

std::string flag_hints(const CLI::App& app) {
  const CLI::App* cmd = command_with_extras(app);
  if (!cmd) return "";
  std::vector<std::string> names;  // with their dashes
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  std::string out;
  for (const std::string& arg : cmd->remaining()) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string want = bare(arg);
    if (want.empty() || std::isdigit(static_cast<unsigned char>(want[0]))) continue;  // a negative number
    // Close: a few edits apart, or one name the start of the other (--temperature, --temp).
    std::vector<std::pair<size_t, std::string>> close;
    for (const std::string& n : names) {
      const std::string have = bare(n);
      const size_t d = edit_distance(want, have);
      const bool prefix = std::min(want.size(), have.size()) >= 3 &&
                          (want.rfind(have, 0) == 0 || have.rfind(want, 0) == 0);
      if (d <= std::max<size_t>(1, want.size() / 3) || prefix) close.emplace_back(prefix ? 0 : d, n);
    }
    if (close.empty()) continue;
    std::sort(close.begin(), close.end());
    close.erase(std::unique(close.begin(), close.end()), close.end());
    std::string list;
    for (size_t k = 0; k < close.size() && k < 3; ++k) list += (k ? " or " : "") + close[k].second;
    out += arg.substr(0, arg.find('=')) + ": did you mean " + list + "?\n";
  }
  return out;
}

}  // namespace pc::cli
