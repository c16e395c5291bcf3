#include "server/chat/volatile_rules.h"

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace pc::server {

namespace {

// The first line a rule searches is at most this long (longer: the rule does not apply).
constexpr size_t kMaxLine = 4096;

const char* kDefaultRules = R"([
  {"name": "claude_code_billing_header", "role": "system",
   "starts_with": "x-anthropic-billing-header:",
   "pattern": "(cc_version=[0-9]+\\.[0-9]+\\.[0-9]+)\\.[0-9a-fA-F]+", "replace": "$1"}
])";

}  // namespace

VolatileRules VolatileRules::defaults() { return parse(nlohmann::json::parse(kDefaultRules), "the default rules"); }

VolatileRules VolatileRules::load(const std::string& spec) {
  if (spec == "off") return {};
  if (spec == "default" || spec.empty()) return defaults();
  std::ifstream in(spec);
  if (!in) throw Error("--volatile-rules: cannot read " + spec + " (off, default or a rules file)");
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw Error("--volatile-rules: " + spec + " is not JSON");
  return parse(j, spec);
}

VolatileRules VolatileRules::parse(const nlohmann::json& rules, const std::string& where) {
  if (!rules.is_array()) throw Error("--volatile-rules: " + where + " must be a JSON array of rules");
  VolatileRules out;
  for (size_t i = 0; i < rules.size(); ++i) {
    const nlohmann::json& r = rules[i];
    const std::string at = where + " rule " + std::to_string(i);
    auto str = [&](const char* key, bool required) {
      const auto it = r.is_object() ? r.find(key) : r.end();
      if (it == r.end() || it->is_null()) {
        if (required) throw Error("--volatile-rules: " + at + " needs a string '" + key + "'");
        return std::string();
      }
      if (!it->is_string()) throw Error("--volatile-rules: " + at + ": '" + key + "' must be a string");
      return it->get<std::string>();
    };
    VolatileRule rule;
    rule.name = str("name", true);
    rule.role = str("role", false);
    if (rule.role.empty()) rule.role = "any";
    if (rule.role != "any" && rule.role != "system" && rule.role != "user" && rule.role != "assistant" &&
        rule.role != "tool")
      throw Error("--volatile-rules: " + at + ": 'role' must be system, user, assistant, tool or any");
    rule.starts_with = str("starts_with", false);
    rule.pattern = str("pattern", true);
    rule.replace = str("replace", false);
    try {
      rule.regex = std::regex(rule.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("--volatile-rules: " + at + ": bad pattern '" + rule.pattern + "': " + e.what());
    }
    out.rules_.push_back(std::move(rule));
  }
  return out;
}

bool VolatileRules::apply_text(const VolatileRule& r, std::string& text) const {
  if (text.compare(0, r.starts_with.size(), r.starts_with) != 0) return false;
  const size_t line_end = std::min(text.find('\n'), text.size());
  if (line_end > kMaxLine) return false;
  const std::string line = text.substr(0, line_end);
  const std::string out = std::regex_replace(line, r.regex, r.replace);
  if (out == line) return false;
  text.replace(0, line_end, out);
  return true;
}

std::vector<std::string> VolatileRules::apply(nlohmann::json& messages) const {
  std::vector<std::string> fired;
  if (rules_.empty() || !messages.is_array()) return fired;
  for (const VolatileRule& r : rules_) {
    bool any = false;
    for (nlohmann::json& m : messages) {
      if (!m.is_object()) continue;
      const auto role = m.find("role");
      if (r.role != "any" && (role == m.end() || *role != r.role)) continue;
      const auto c = m.find("content");
      if (c == m.end()) continue;
      if (c->is_string()) {
        any = apply_text(r, c->get_ref<std::string&>()) || any;
      } else if (c->is_array()) {
        for (nlohmann::json& part : *c) {
          if (!part.is_object() || part.value("type", "") != "text") continue;
          const auto t = part.find("text");
          if (t != part.end() && t->is_string()) any = apply_text(r, t->get_ref<std::string&>()) || any;
        }
      }
    }
    if (any) fired.push_back(r.name);
  }
  return fired;
}

}  // namespace pc::server
