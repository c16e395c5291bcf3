// Jinja lexer with the Hugging Face settings: trim_blocks and lstrip_blocks
// on, keep_trailing_newline off, `{%- -%}` / `{%+ +%}` whitespace control.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pc::jinja {

enum class TokType { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  TokType type;
  std::string value;  // text for Data/Name/String/Op
  int64_t ival = 0;
  double fval = 0;
  int line = 0;
  int col = 0;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws ChatTemplateError (with line and column) on lexical errors.
std::vector<Token> tokenize(const std::string& source, const LexOptions& opts = {});

// "begin of statement block", "end of print statement", the operator, ...
std::string describe_token(const Token& t);

}  // namespace pc::jinja
