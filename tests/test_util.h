// Helpers shared by the test executables.
#pragma once
#include <string>

namespace pc::test {

// Folder with models/, vocab/, templates-2026/ (../shared beside the repository).
std::string shared_dir();
// Path of the built `promptcache` executable.
std::string cli_path();
// A fresh empty directory under the system temp dir, removed at process exit.
std::string temp_dir();
// The whole file, byte for byte; throws std::runtime_error naming it if it
// cannot be opened.
std::string read_file(const std::string& path);
// A loopback TCP port free right now (0 when none could be had).
int free_port();

}  // namespace pc::test
