// The server's side of the shared Redis tier: reply memory through Redis, the startup
// warning and /health's "redis" field (server/state.h).
#include <cstdio>

#include "engine/kv_tiers.h"
#include "server/chat/reply_store.h"
#include "server/state.h"

namespace pc::server {

namespace {

// The engine's Redis tier, or null without one. Its pointer is fixed once the engine
// is built, and reachable() is lock-free, so any thread may ask.
const KvTier* redis_tier(const Server::State& st) {
  const KvTiers* tiers = st.engine->cache().tiers();
  if (!tiers) return nullptr;
  for (const KvTier* t : tiers->tiers())
    if (std::string(t->name()) == "redis") return t;
  return nullptr;
}

}  // namespace

void open_shared_tier(Server::State& st) {
  const TierOptions& t = st.opt.tiers;
  if (t.redis_url.empty()) return;
  // A reply and the prompt it followed fit the context: that bounds a stored value.
  st.shared_replies = std::make_unique<RedisReplyStore>(t.redis_url, t.redis_ttl_seconds, st.model->fingerprint(),
                                                        st.model->config().n_vocab, st.n_ctx);
  st.memory.set_shared(st.shared_replies.get());
  st.shared_replies->watch([&st] { st.memory.reshare(); });
  // Stored responses too, so another server can continue one (previous_response_id).
  st.responses.open_redis(t.redis_url, t.redis_ttl_seconds, st.model->fingerprint(), st.model->config().n_vocab,
                          st.n_ctx);
  const KvTier* kv = redis_tier(st);
  if ((kv && !kv->reachable()) || !st.shared_replies->reachable())
    std::fprintf(stderr,
                 "promptcache: warning: Redis at %s is unreachable: serving from memory%s only, "
                 "retrying in the background (/health says \"redis\": \"down\" until it answers)\n",
                 t.redis_url.c_str(), t.disk_dir.empty() ? "" : " and disk");
}

std::optional<std::string> redis_health(const Server::State& st) {
  if (st.opt.tiers.redis_url.empty()) return std::nullopt;
  const KvTier* kv = redis_tier(st);
  return kv && kv->reachable() ? "up" : "down";
}

}  // namespace pc::server
