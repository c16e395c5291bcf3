// Volatile blocks: per-request nonces a known client writes into its prompt that mean
// nothing to the model, normalised before the template renders, so that two sessions
// of the same harness render the same prompt and share its cached KV.
//
// A rule looks at the text of each message of a role (a string content, or each text
// part): when the text starts with `starts_with`, `pattern` (ECMAScript) is replaced by
// `replace` ($1... for groups) in its first line only — a bounded search, whatever the
// size of the prompt. The default set:
//
//   claude_code_billing_header  system text starting "x-anthropic-billing-header:":
//                               "cc_version=2.1.37.a3f;" → "cc_version=2.1.37;" (the
//                               3 hex digits follow the session's first prompt)
//
// A rules file (--volatile-rules FILE) is a JSON array of
//   {"name": N, "role": "system"|"user"|"assistant"|"tool"|"any", "starts_with": S,
//    "pattern": REGEX, "replace": R}
// that replaces the default set.
#pragma once
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pc::server {

struct VolatileRule {
  std::string name;
  std::string role;         // "any": every role
  std::string starts_with;  // the text must start with this (may be empty)
  std::string pattern;      // as given
  std::regex regex;
  std::string replace;
};

class VolatileRules {
 public:
  VolatileRules() = default;  // no rules
  static VolatileRules defaults();
  // "off", "default", or a rules file; throws pc::Error naming the file and the bad rule.
  static VolatileRules load(const std::string& spec);
  static VolatileRules parse(const nlohmann::json& rules, const std::string& where);

  // Normalises `messages` (OpenAI-style, as sent) in place; the names of the rules that
  // changed some text, each once, in rule order.
  std::vector<std::string> apply(nlohmann::json& messages) const;
  const std::vector<VolatileRule>& rules() const { return rules_; }

 private:
  bool apply_text(const VolatileRule& r, std::string& text) const;
  std::vector<VolatileRule> rules_;
};

}  // namespace pc::server
