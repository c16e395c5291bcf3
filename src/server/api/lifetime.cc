#include "server/api/lifetime.h"

#include "server/api/api_error.h"

namespace pc::server {

double anthropic_ttl_seconds(const nlohmann::json* ttl, const std::string& param) {
  if (!ttl || ttl->is_null()) return 300;
  if (*ttl == "5m") return 300;
  if (*ttl == "1h") return 3600;
  throw bad_field(param, "'" + param + "' must be \"5m\" or \"1h\"");
}

std::optional<double> openai_retention_seconds(const nlohmann::json& body) {
  auto it = body.find("prompt_cache_retention");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (*it == "in_memory" || *it == "in-memory") return 300;
  if (*it == "24h") return 86400;
  throw bad_field("prompt_cache_retention",
                  "'prompt_cache_retention' must be \"in_memory\" (or \"in-memory\") or \"24h\"");
}

void add_retention_json(nlohmann::json& j, const RetentionReport& r) {
  const bool kept = r.tokens > 0;
  j["retained_tokens"] = r.tokens;
  j["expires_at"] = kept ? nlohmann::json(r.expires_at) : nlohmann::json(nullptr);
  j["expires_tier"] = kept ? nlohmann::json(r.tier) : nlohmann::json(nullptr);
}

}  // namespace pc::server
