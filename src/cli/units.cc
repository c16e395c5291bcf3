#include "cli/units.h"

#include <cctype>
#include <cstdio>

#include "common/error.h"

namespace pc::cli {

int64_t parse_bytes(const std::string& s) {
  size_t i = 0;
  double v = 0;
  bool digits = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i, digits = true;
  if (!digits) throw Error("invalid size '" + s + "' (expected e.g. 4GiB, 512MiB, 1000000)");
  v = std::stod(s.substr(0, i));
  std::string unit = s.substr(i);
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  double mul = 0;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "gb") mul = 1e9;
  else if (unit == "tb") mul = 1e12;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
  else throw Error("invalid size unit in '" + s + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  return int64_t(v * mul);
}

int64_t parse_duration_ms(const std::string& s) {
  size_t i = 0;
  int dots = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) dots += s[i++] == '.';
  if (i == 0 || dots > 1 || s[0] == '.' || s[i - 1] == '.')
    throw Error("invalid duration '" + s + "' (expected e.g. 30s, 500ms, 2m, 1h)");
  const double v = std::stod(s.substr(0, i));
  const std::string unit = s.substr(i);
  double mul = 0;
  if (unit.empty() || unit == "s") mul = 1000;
  else if (unit == "ms") mul = 1;
  else if (unit == "m") mul = 60e3;
  else if (unit == "h") mul = 3600e3;
  else throw Error("invalid duration unit in '" + s + "' (use ms, s, m, h)");
  const double ms = v * mul;
  if (ms > 1e15) throw Error("duration '" + s + "' is too long");
  return int64_t(ms);
}

std::string format_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace pc::cli
