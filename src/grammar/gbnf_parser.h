// GBNF, llama.cpp's grammar format (llama-server's `grammar` field), parsed into a
// checked byte-level Grammar (grammar.h).
//
//   root  ::= "{" ws pair ("," ws pair)* "}"     rules: name ::= alternatives
//   pair  ::= [a-z]+ ":" ws [0-9]{1,3}           literals "...", classes [...] [^...], .
//   ws    ::= [ \t\n]*                           groups ( ), alternatives |,
//                                                repetition * + ? {m} {m,} {m,n}, # comments
//
// Names are letters, digits, '-' and '_'. Escapes: \n \r \t \\ \" \' \[ \] \- \/ \xHH
// \uHHHH \UHHHHHHHH. A rule ends at the end of its line unless a group is open or
// the next line starts with '|'. Token references (<[id]>, <text>, !<...>) are not
// supported: an error says so. Every error names the line and column.
#pragma once
#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace pc::grammar {

// Throws GrammarError.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text);

// Repetition bounds above this are an error (each repetition unrolls into rules).
constexpr int kMaxRepetition = 10000;

}  // namespace pc::grammar
