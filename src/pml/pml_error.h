// Errors in PML text. Every one names where it happened (1-based line and
// column, columns counted in characters) and says what is wrong:
//
//   support.pml: line 7, column 3: module 'reply' has no parameter 'lang2'
//
// PmlError is a pc::Error, so the CLI and server edges that already turn
// pc::Error into a message / HTTP 400 handle it without knowing about PML.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace pc::pml {

// A place in a PML text. line == 0 means "no place" (e.g. an empty document).
struct Loc {
  int line = 0;
  int column = 0;
};

class PmlError : public Error {
 public:
  // source: file name or other label shown first ("" to omit).
  PmlError(std::string_view source, Loc loc, const std::string& message);
  const Loc& loc() const { return loc_; }
  const std::string& message() const { return message_; }  // without the location

 private:
  Loc loc_;
  std::string message_;
};

// Maps byte offsets of a text to lines and columns.
class SourceMap {
 public:
  SourceMap(std::string_view text, std::string source_name);
  Loc at(ptrdiff_t offset) const;  // offset < 0 → {0, 0}; clamped to the text
  const std::string& name() const { return name_; }
  std::string_view text() const { return text_; }
  [[noreturn]] void fail(Loc loc, const std::string& message) const;
  [[noreturn]] void fail_at(ptrdiff_t offset, const std::string& message) const {
    fail(at(offset), message);
  }

 private:
  std::string_view text_;
  std::string name_;
  std::vector<size_t> line_starts_;  // byte offset of each line's first byte
  // The last answer of at(): where the next one on the same line may count on from.
  mutable size_t last_line_ = 0, last_offset_ = 0;
  mutable int last_column_ = 1;
};

// "line 3, column 5"
std::string describe_loc(Loc loc);

}  // namespace pc::pml
