#include "pml/pml_error.h"

#include <algorithm>

namespace pc::pml {

namespace {

std::string full_message(std::string_view source, Loc loc, const std::string& message) {
  std::string out;
  if (!source.empty()) out.append(source).append(": ");
  if (loc.line > 0) out += describe_loc(loc) + ": ";
  return out + message;
}

}  // namespace

std::string describe_loc(Loc loc) {
  return "line " + std::to_string(loc.line) + ", column " + std::to_string(loc.column);
}

PmlError::PmlError(std::string_view source, Loc loc, const std::string& message)
    : Error(full_message(source, loc, message)), loc_(loc), message_(message) {}

SourceMap::SourceMap(std::string_view text, std::string source_name)
    : text_(text), name_(std::move(source_name)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    // "\r\n" and lone "\r" end a line as "\n" does (XML end-of-line handling).
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')))
      line_starts_.push_back(i + 1);
  }
}

Loc SourceMap::at(ptrdiff_t offset) const {
  if (offset < 0) return {};
  const size_t off = std::min(static_cast<size_t>(offset), text_.size());
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
  const size_t line = static_cast<size_t>(it - line_starts_.begin());  // 1-based
  // Columns are counted from the line's start, or on from the last offset asked for
  // when it lies before this one on the same line: a parse asks in document order, so
  // a document on one long line costs one pass, not one per element.
  size_t from = line_starts_[line - 1];
  int column = 1;
  if (last_line_ == line && last_offset_ <= off) {
    from = last_offset_;
    column = last_column_;
  }
  for (size_t i = from; i < off; ++i)
    if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;  // UTF-8 lead bytes
  last_line_ = line;
  last_offset_ = off;
  last_column_ = column;
  return {static_cast<int>(line), column};
}

void SourceMap::fail(Loc loc, const std::string& message) const {
  throw PmlError(name_, loc, message);
}

}  // namespace pc::pml
