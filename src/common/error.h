// The one exception type the library throws for bad input (files, arguments).
// The CLI and server turn it into a message and an exit code / HTTP status at
// their edge; nothing below them catches it.
#pragma once
#include <stdexcept>
#include <string>

namespace pc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace pc
