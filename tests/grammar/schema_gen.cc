#include "schema_gen.h"

#include <random>
#include <string>

namespace pc::grammar::test {

namespace {

using ojson = nlohmann::ordered_json;

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 1; }

  ojson scalar() {
    switch (pick(12)) {
      case 0: return {{"type", "string"}, {"maxLength", pick(8)}};
      case 1: {
        const int lo = pick(3);
        return {{"type", "string"}, {"minLength", lo}, {"maxLength", lo + pick(5)}};
      }
      case 2: {
        static const char* formats[] = {"date", "time", "date-time", "uuid", "email", "ipv4"};
        return {{"type", "string"}, {"format", formats[pick(6)]}};
      }
      case 3: return {{"enum", {"red", "green", "blue", "x\"y", "ünï"}}};
      case 4: return {{"type", "integer"}};
      case 5: {
        const int lo = pick(200) - 100;
        return {{"type", "integer"}, {"minimum", lo}, {"maximum", lo + pick(300)}};
      }
      case 6: {
        ojson s = {{"type", "integer"}, {"exclusiveMinimum", pick(50) - 20}};
        if (coin()) s["exclusiveMaximum"] = 40 + pick(100);
        return s;
      }
      case 7: {
        const double lo = (pick(400) - 200) / 4.0;
        return {{"type", "number"}, {"minimum", lo}, {"maximum", lo + 1 + pick(100) / 2.0}};
      }
      case 8: return {{"type", "number"}};
      case 9: return {{"type", "boolean"}};
      case 10: return {{"const", pick(2) ? ojson("fixed") : ojson(42)}};
      default: return {{"type", {"string", "null"}}, {"maxLength", 4}};
    }
  }

  // depth 0: the top; containers below depth 1 hold scalars only.
  ojson value(int depth) {
    const int k = depth >= 2 ? 0 : pick(10);
    if (k <= 4) {
      ojson s = scalar();
      if (pick(8) == 0) s["nullable"] = true;
      return s;
    }
    if (k <= 6) return object(depth);
    if (k == 7) {
      ojson s = {{"type", "array"}, {"items", value(depth + 1)}};
      const int lo = pick(2);
      s["minItems"] = lo;
      s["maxItems"] = lo + pick(2);
      return s;
    }
    if (k == 8) return {{"anyOf", {value(depth + 1), scalar()}}};
    return {{"type", "array"}, {"prefixItems", {scalar(), scalar()}}, {"items", false}};
  }

  ojson object(int depth) {
    ojson props = ojson::object();
    ojson required = ojson::array();
    const int n = 1 + pick(depth == 0 ? 4 : 2);
    for (int i = 0; i < n; ++i) {
      const std::string name = std::string(1, char('a' + pick(26))) + std::to_string(i);
      props[name] = value(depth + 1);
      if (coin()) required.push_back(name);
    }
    ojson s = {{"type", "object"}, {"properties", props}, {"required", required}};
    if (coin()) s["additionalProperties"] = false;
    return s;
  }

  ojson top() {
    if (pick(10) == 0) {  // a $ref to a definition
      ojson s = {{"$defs", {{"item", object(1)}}}, {"type", "object"}};
      s["properties"] = {{"first", {{"$ref", "#/$defs/item"}}},
                         {"more", {{"type", "array"}, {"items", {{"$ref", "#/$defs/item"}}}, {"maxItems", 1}}}};
      s["required"] = {"first"};
      return s;
    }
    return pick(5) == 0 ? value(0) : object(0);
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

ojson random_schema(uint64_t seed) { return Gen(seed).top(); }

}  // namespace pc::grammar::test
