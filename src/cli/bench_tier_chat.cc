// `promptcache bench tiers --chat`: a long chat written through --disk-cache and
// --redis. Each turn appends user tokens to the history, generates a reply and lets
// write-through store the turn; at the end, what each tier stored and wrote is set
// against the bytes of the session's final KV, and a restarted engine (the disk alone)
// and a second engine (Redis alone) answer one more turn from the tiers.
//
// The previous scheme (one whole-prefix entry per turn: the page-aligned history with
// KV, and the prompt's own when shorter) is not run; its bytes are computed from the
// same turns' lengths with its entry size (the format's header and whole pages), which
// is exactly what its write-through stored.
#include "cli/bench_tier_chat.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli/progress.h"
#include "common/error.h"
#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "model/make_model.h"
#include "model/model.h"
#include "tier/entry.h"

namespace pc::cli {

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Bytes of one whole-prefix entry of n tokens in the previous format (version 3: an
// 88-byte fixed header, the namespace strings, tokens and positions, whole pages).
int64_t whole_prefix_entry_bytes(const KvNamespace& ns, const KvShape& shape, int64_t n) {
  // entry_max_bytes is this format's size; the previous header was 16 bytes shorter.
  return int64_t(entry_max_bytes(ns, shape, size_t(n))) - 16;
}

const TierStats* find_tier(const std::optional<TierReport>& r, const std::string& name) {
  if (!r) return nullptr;
  for (const TierStats& t : r->tiers)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

nlohmann::json run_tier_chat(const TierChatOptions& o) {
  fs::create_directories(o.scratch);
  std::string model_path = o.model;
  if (model_path.empty()) {
    model_path = o.scratch + "/" + o.shape + "-chat.gguf";
    if (!fs::exists(model_path)) {
      MakeModelOptions mo;
      mo.shape = o.shape;
      mo.context_length = int64_t(o.turns) * (o.turn_tokens + o.reply_tokens) + 4096;
      make_random_model(mo, model_path);
    }
  }
  auto model = Model::load(model_path);
  const auto& c = model->config();
  const int64_t final_tokens = int64_t(o.turns) * (o.turn_tokens + o.reply_tokens);
  EngineOptions eo;
  eo.threads = o.threads;
  eo.kv_memory_bytes = int64_t(c.n_layer) * c.n_kv_head * c.head_dim * 4 * (final_tokens + 4096) + (64 << 20);
  const std::string disk_dir = o.scratch + "/chat-disk";
  fs::remove_all(disk_dir);
  auto engine_with = [&](const std::string& disk, const std::string& redis) {
    EngineOptions e = eo;
    e.tiers.disk_dir = disk;
    e.tiers.disk_fsync = false;
    e.tiers.redis_url = redis;
    return std::make_unique<Engine>(*model, e);
  };

  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(3, int32_t(std::min<int64_t>(c.n_vocab, 30000)) - 1);
  std::vector<int32_t> history{1};
  int64_t previous_bytes = 0;  // what the whole-prefix scheme would have written, per tier
  auto a = engine_with(disk_dir, o.redis_url);
  const KvNamespace ns = a->ns("");
  const KvShape shape = a->cache().stats().pool.page_size > 0
                            ? KvShape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), int(a->cache().stats().pool.page_size)}
                            : KvShape{};
  const int32_t P = shape.page_size;
  Progress progress("tier-chat", o.turns);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < o.turns; ++t) {
    progress.set(t, "turn " + std::to_string(t + 1));
    for (int i = 0; i < o.turn_tokens - (t == 0 ? 1 : 0); ++i) history.push_back(tok(rng));
    GenerateRequest req;
    req.prompt = history;
    req.max_tokens = o.reply_tokens;
    req.stop_at_eog = false;
    const GenerateResult r = a->generate(req);
    const int64_t n_prompt = int64_t(history.size());
    history.insert(history.end(), r.tokens.begin(), r.tokens.end());
    a->flush_tiers();
    // The previous write-through: the aligned prefix of everything with KV (the last
    // generated token has none) and of the prompt without its last token, when shorter.
    const int64_t with_kv = int64_t(history.size()) - 1;
    const int64_t full = with_kv / P * P, prompt = (n_prompt - 1) / P * P;
    if (full > 0) previous_bytes += whole_prefix_entry_bytes(ns, shape, full);
    if (prompt > 0 && prompt != full) previous_bytes += whole_prefix_entry_bytes(ns, shape, prompt);
  }
  progress.done();
  const double chat_s = seconds_since(t0);
  const CacheStats st = a->cache().stats();
  const int64_t bpt = st.pool.bytes_per_token();
  const int64_t kv_tokens = int64_t(history.size()) - 1;
  const int64_t final_kv_bytes = kv_tokens * bpt;

  nlohmann::json out = {{"turns", o.turns}, {"turn_tokens", o.turn_tokens}, {"reply_tokens", o.reply_tokens},
                        {"final_tokens", kv_tokens}, {"kv_type", st.pool.kv_type}, {"bytes_per_token", bpt},
                        {"final_kv_bytes", final_kv_bytes}, {"previous_scheme_bytes_per_tier", previous_bytes},
                        {"chat_seconds", chat_s}};
  std::printf("== a %d-turn chat through the tiers: %lld tokens, %s KV, %lld bytes per token, final KV %.1f MB\n",
              o.turns, (long long)kv_tokens, st.pool.kv_type.c_str(), (long long)bpt, double(final_kv_bytes) / 1e6);
  std::printf("%-8s %12s %10s %14s %16s %12s\n", "tier", "tokens held", "entries", "bytes written",
              "written / final", "previous / final");
  for (const char* name : {"disk", "redis"}) {
    const TierStats* s = find_tier(st.tiers, name);
    if (!s) continue;
    const double ratio = double(s->bytes_written) / double(final_kv_bytes);
    const double before = double(previous_bytes) / double(final_kv_bytes);
    std::printf("%-8s %12s %10s %14lld %15.3fx %15.2fx\n", name,
                s->tokens >= 0 ? std::to_string(s->tokens).c_str() : "-",
                s->entries >= 0 ? std::to_string(s->entries).c_str() : "-", (long long)s->bytes_written, ratio,
                before);
    out["tiers"][name] = {{"tokens", s->tokens}, {"entries", s->entries}, {"bytes_written", s->bytes_written},
                          {"bytes_read", s->bytes_read}, {"written_over_final", ratio},
                          {"previous_over_final", before}};
  }
  a.reset();  // the server stops; its tiers stay

  // One more turn on a restarted server (the disk alone) and on another server (Redis alone).
  std::vector<int32_t> next = history;
  for (int i = 0; i < 16; ++i) next.push_back(tok(rng));
  GenerateRequest req;
  req.prompt = next;
  req.max_tokens = 1;
  req.stop_at_eog = false;
  auto reuse = [&](const char* label, const std::string& disk, const std::string& redis) {
    auto e = engine_with(disk, redis);
    const auto t1 = std::chrono::steady_clock::now();
    const GenerateResult r = e->generate(req);
    const double s = seconds_since(t1);
    std::printf("%-40s reused %lld of %lld history tokens in %.2f s\n", label, (long long)r.n_promoted,
                (long long)kv_tokens, s);
    out["reuse"][label] = {{"promoted_tokens", r.n_promoted}, {"history_tokens", kv_tokens}, {"seconds", s}};
  };
  reuse("restarted server (--disk-cache)", disk_dir, "");
  if (!o.redis_url.empty()) reuse("second server (--redis)", "", o.redis_url);
  fs::remove_all(disk_dir);
  return out;
}

}  // namespace pc::cli
