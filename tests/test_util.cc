#include "test_util.h"

#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

namespace pc::test {

std::string shared_dir() {
  if (const char* s = std::getenv("PC_SHARED_DIR")) return s;
  return PC_SHARED_DIR;
}

std::string cli_path() { return PC_CLI_PATH; }

namespace {
struct TempDirs {
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
TempDirs g_temp_dirs;
}  // namespace

std::string temp_dir() {
  std::random_device rd;
  auto p = std::filesystem::temp_directory_path() /
           ("pc-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(p);
  g_temp_dirs.dirs.push_back(p);
  return p.string();
}

}  // namespace pc::test
