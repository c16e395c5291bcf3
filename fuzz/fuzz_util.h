// Helpers shared by the fuzz targets in this folder (header-only: each target
// is one executable built from one .cc).
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pc::fuzz {

// Reports a broken invariant the way a crash is reported: libFuzzer saves the
// input and the run stops.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail("cannot read " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The chat templates of well-known models (../shared/templates-2026), sorted by
// file name so that an index names the same template on every machine.
inline std::vector<std::filesystem::path> shared_templates() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path dir = std::filesystem::path(PC_SHARED_DIR) / "templates-2026";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".jinja") out.push_back(e.path());
  if (out.empty()) fail("no *.jinja templates in " + dir.string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pc::fuzz
