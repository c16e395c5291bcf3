#include "schema_validator.h"

#include <cmath>
#include <regex>

namespace pc::grammar::test {

namespace {

using json = nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  return false;
}

std::string check_format(const std::string& s, const std::string& f) {
  static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  static const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
  std::string re;
  if (f == "date") re = date;
  else if (f == "time") re = time;
  else if (f == "date-time") re = date + "T" + time;
  else if (f == "uuid") re = R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})";
  else if (f == "email") re = R"([A-Za-z0-9_%+.-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})";
  else if (f == "ipv4") re = R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  else return "unknown format " + f;
  return std::regex_match(s, std::regex(re)) ? "" : "'" + s + "' is not a " + f;
}

}  // namespace

std::string validate(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "schema false";
  if (s.contains("nullable") && s["nullable"].get<bool>() && v.is_null()) return "";
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const size_t slash = ref.rfind('/');
    const std::string section = ref.substr(2, slash - 2), name = ref.substr(slash + 1);
    return validate(v, root[section][name], root);
  }
  if (s.contains("const") && v != s["const"]) return v.dump() + " is not the const " + s["const"].dump();
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found = found || e == v;
    if (!found) return v.dump() + " is not in the enum";
  }
  if (s.contains("anyOf")) {
    for (const auto& sub : s["anyOf"])
      if (validate(v, sub, root).empty()) return "";
    return v.dump() + " matches no anyOf branch";
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const auto& sub : s["oneOf"]) n += validate(v, sub, root).empty();
    if (n != 1) return v.dump() + " matches " + std::to_string(n) + " oneOf branches";
  }
  if (s.contains("allOf"))
    for (const auto& sub : s["allOf"])
      if (auto e = validate(v, sub, root); !e.empty()) return e;
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = has_type(v, s["type"]);
    else
      for (const auto& t : s["type"]) ok = ok || has_type(v, t);
    if (!ok) return v.dump() + " is not of type " + s["type"].dump();
  }
  if (v.is_string()) {
    const std::string str = v;
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return "'" + str + "' too short";
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return "'" + str + "' too long";
    if (s.contains("format")) return check_format(str, s["format"]);
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    auto excl = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
    if (s.contains("minimum") && (excl("exclusiveMinimum") ? x <= s["minimum"].get<double>() : x < s["minimum"].get<double>()))
      return v.dump() + " below minimum";
    if (s.contains("maximum") && (excl("exclusiveMaximum") ? x >= s["maximum"].get<double>() : x > s["maximum"].get<double>()))
      return v.dump() + " above maximum";
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && x <= s["exclusiveMinimum"].get<double>())
      return v.dump() + " not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && x >= s["exclusiveMaximum"].get<double>())
      return v.dump() + " not below exclusiveMaximum";
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& r : s["required"])
        if (!v.contains(r.get<std::string>())) return "missing required " + r.get<std::string>();
    for (const auto& [k, x] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(k)) {
        if (auto e = validate(x, s["properties"][k], root); !e.empty()) return k + ": " + e;
      } else if (s.contains("additionalProperties")) {
        if (auto e = validate(x, s["additionalProperties"], root); !e.empty()) return "extra " + k + ": " + e;
      } else if (s.contains("properties")) {
        return "unexpected property " + k;  // the compiler's reading of an absent additionalProperties
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "too many items";
    size_t first = 0;
    if (s.contains("prefixItems")) {
      if (v.size() != s["prefixItems"].size()) return "tuple of the wrong length";
      for (; first < v.size(); ++first)
        if (auto e = validate(v[first], s["prefixItems"][first], root); !e.empty()) return e;
    }
    if (s.contains("items"))
      for (size_t i = first; i < v.size(); ++i)
        if (auto e = validate(v[i], s["items"], root); !e.empty()) return "item " + std::to_string(i) + ": " + e;
  }
  return "";
}

}  // namespace pc::grammar::test
