// The server's side of the shared Redis tier: reply memory through Redis, the startup
// warning and /health's "redis" field (server/state.h). Reachability is the reply
// store's connection's (the same server as the engine's KV tier, reached by a
// connection of its own), read without a lock, so /health never waits for the engine.
#include <cstdio>

#include "server/chat/reply_store.h"
#include "server/state.h"

namespace pc::server {

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
  if (!st.shared_replies->reachable())
    std::fprintf(stderr,
                 "promptcache: warning: Redis at %s is unreachable: serving from memory%s only, "
                 "retrying in the background (/health says \"redis\": \"down\" until it answers)\n",
                 t.redis_url.c_str(), t.disk_dir.empty() ? "" : " and disk");
}

std::optional<std::string> redis_health(const Server::State& st) {
  if (st.opt.tiers.redis_url.empty()) return std::nullopt;
  return st.shared_replies && st.shared_replies->reachable() ? "up" : "down";
}

}  // namespace pc::server
