// Integers and decimal numbers within bounds, as GBNF expressions (JSON Schema
// minimum / maximum / exclusiveMinimum / exclusiveMaximum).
//
// Integers: exactly the integers in the range, in shortest decimal form, split into
// digit-aligned pieces ([lo, hi] = 7..123 → [7-9] | [1-9] [0-9] | "1" ( [0-1] [0-9] | "2" [0-3] )).
// Numbers: a subset of the range that a grammar can state simply — n + a fraction
// for every integer n with [n, n + 1) inside it, and the integers at its edges —
// with at most 6 fraction digits, no exponent, and magnitudes up to 1e9, so that
// each value parses to a double inside the bounds.
#pragma once
#include <cstdint>
#include <string>

namespace pc::grammar {

struct NumberBounds {
  double lo, hi;  // -inf / +inf when absent
  bool lo_exclusive = false, hi_exclusive = false;
};

// Largest magnitude of a bounded integer (16 digits, as unbounded integers have).
constexpr int64_t kMaxBoundedInteger = 9999999999999999;

// GBNF for the integers in the bounds (open sides up to kMaxBoundedInteger); "" when
// there is none.
std::string integer_range_gbnf(const NumberBounds& b);
// GBNF for numbers in the bounds (see above); "" when the subset is empty.
std::string number_range_gbnf(const NumberBounds& b);
// Non-negative integers in [lo, hi] (lo <= hi), without leading zeros.
std::string nonnegative_range_gbnf(int64_t lo, int64_t hi);

}  // namespace pc::grammar
