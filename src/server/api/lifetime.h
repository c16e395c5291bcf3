// Cache lifetimes as clients ask for them (docs/api.md "Lifetimes"): Anthropic's
// cache_control.ttl ("5m", "1h") and OpenAI's prompt_cache_retention ("in_memory",
// "in-memory", "24h"), turned into seconds for GenerateRequest::retain.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace pc::server {

// Seconds of an Anthropic cache_control ttl ("5m" when absent); ApiError 400 naming
// `param` for another value.
double anthropic_ttl_seconds(const nlohmann::json* ttl, const std::string& param);
// Seconds of the request's prompt_cache_retention, or nothing when it has none;
// ApiError 400 for another value. in_memory is 5 minutes: OpenAI clears in-memory
// caches after 5 to 10 minutes of inactivity, so 5 is what a client can count on.
std::optional<double> openai_retention_seconds(const nlohmann::json& body);
// The "promptcache" fields of a request's lifetime: retained_tokens, expires_at (unix
// seconds, null when no prefix of the prompt is guaranteed) and expires_tier.
void add_retention_json(nlohmann::json& j, const RetentionReport& r);

}  // namespace pc::server
