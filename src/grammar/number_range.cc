#include "grammar/number_range.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pc::grammar {

namespace {

std::string digit_class(char lo, char hi) {
  return lo == hi ? std::string("\"") + lo + "\"" : std::string("[") + lo + "-" + hi + "]";
}

// Digit strings of one length between x and y (x <= y; inner positions may be 0).
std::string same_length(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 1) return digit_class(x[0], y[0]);
  const std::string xr = x.substr(1), yr = y.substr(1);
  if (x[0] == y[0]) return digit_class(x[0], x[0]) + " " + same_length(xr, yr);
  const bool x_low = xr == std::string(n - 1, '0'), y_high = yr == std::string(n - 1, '9');
  const std::string any = " [0-9]{" + std::to_string(n - 1) + "}";
  std::vector<std::string> parts;
  char lo = x[0], hi = y[0];
  if (!x_low) {
    parts.push_back(digit_class(x[0], x[0]) + " ( " + same_length(xr, std::string(n - 1, '9')) + " )");
    ++lo;
  }
  std::string top;
  if (!y_high) {
    top = digit_class(y[0], y[0]) + " ( " + same_length(std::string(n - 1, '0'), yr) + " )";
    --hi;
  }
  if (lo <= hi) parts.push_back(digit_class(lo, hi) + any);
  if (!top.empty()) parts.push_back(top);
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " | ") + p;
  return "( " + out + " )";
}

int64_t clamp_to_int(double v) {
  const double cap = double(kMaxBoundedInteger);
  return int64_t(std::clamp(v, -cap, cap));
}

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.empty()) return "";
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "( " + out + " )";
}

}  // namespace

std::string nonnegative_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  int64_t start = 0, end = 9;  // numbers of one digit count: [start, end]
  for (int len = 1; len <= 19 && start <= hi; ++len) {
    const int64_t a = std::max(lo, start), b = std::min(hi, end);
    if (a <= b) alts.push_back(same_length(std::to_string(a), std::to_string(b)));
    start = end + 1;
    end = end > INT64_MAX / 10 ? INT64_MAX : end * 10 + 9;
  }
  return join_alts(alts);
}

std::string integer_range_gbnf(const NumberBounds& b) {
  const int64_t lo = clamp_to_int(b.lo_exclusive ? std::floor(b.lo) + 1 : std::ceil(b.lo));
  const int64_t hi = clamp_to_int(b.hi_exclusive ? std::ceil(b.hi) - 1 : std::floor(b.hi));
  if (lo > hi) return "";
  std::vector<std::string> alts;
  if (hi >= 0) alts.push_back(nonnegative_range_gbnf(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back("\"-\" " + nonnegative_range_gbnf(std::max<int64_t>(1, -hi), -lo));
  return join_alts(alts);
}

// Values n + f (f a fraction of up to 6 digits, or none). For the non-negative side,
// n with [n, n + 1) inside the bounds take any fraction, and the integers beyond them
// up to the top bound none; the negative side mirrors it (-(m + f) lies in
// (-(m + 1), -m]).
std::string number_range_gbnf(const NumberBounds& b) {
  constexpr double kCap = 1e9;
  const double lo = std::max(b.lo, -kCap), hi = std::min(b.hi, kCap);
  const bool lo_ex = b.lo_exclusive && b.lo >= -kCap, hi_ex = b.hi_exclusive && b.hi <= kCap;
  const std::string frac = " ( \".\" [0-9]{1,6} )?";
  std::vector<std::string> alts;
  // Non-negative values.
  const int64_t a_lo = std::max<int64_t>(0, int64_t(lo_ex ? std::floor(lo) + 1 : std::ceil(lo)));
  const int64_t a_hi = int64_t(std::floor(hi)) - 1;  // n + 1 <= hi
  if (a_lo <= a_hi) alts.push_back(nonnegative_range_gbnf(a_lo, a_hi) + frac);
  const int64_t b_lo = std::max(a_lo, a_hi + 1);
  const int64_t b_hi = int64_t(hi_ex ? std::ceil(hi) - 1 : std::floor(hi));
  if (b_lo <= b_hi) alts.push_back(nonnegative_range_gbnf(b_lo, b_hi));
  // Negative values: -(m + f).
  if (lo < 0) {
    const int64_t m_lo = std::max<int64_t>(0, int64_t(hi_ex ? std::floor(-hi) + 1 : std::ceil(-hi)));
    const int64_t m_hi = int64_t(std::floor(-lo)) - 1;  // m + 1 <= -lo
    if (m_lo <= m_hi) alts.push_back("\"-\" " + nonnegative_range_gbnf(m_lo, m_hi) + frac);
    const int64_t n_lo = std::max<int64_t>({m_lo, m_hi + 1, 1});
    const int64_t n_hi = int64_t(lo_ex ? std::ceil(-lo) - 1 : std::floor(-lo));
    if (n_lo <= n_hi) alts.push_back("\"-\" " + nonnegative_range_gbnf(n_lo, n_hi));
  }
  return join_alts(alts);
}

}  // namespace pc::grammar
