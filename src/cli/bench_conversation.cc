#include "cli/bench_conversation.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/progress.h"
#include "cli/units.h"
#include "engine/engine.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "model/recurrent_state.h"

namespace pc::cli {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace

void BlockCacheSim::touch(uint64_t h) { last_use_[h] = ++clock_; }

int64_t BlockCacheSim::lookup(const std::vector<int32_t>& prompt) {
  const int64_t max_blocks = (int64_t(prompt.size()) - 1) / block_;
  uint64_t h = 0;
  int64_t hit = 0;
  for (int64_t b = 0; b < max_blocks; ++b) {
    for (int i = 0; i < block_; ++i) h = mix(h, uint32_t(prompt[b * block_ + i]));
    if (!last_use_.count(h)) break;
    touch(h);
    hit += block_;
  }
  return hit;
}

void BlockCacheSim::insert(const std::vector<int32_t>& tokens) {
  uint64_t h = 0;
  for (int64_t b = 0; b < int64_t(tokens.size()) / block_; ++b) {
    for (int i = 0; i < block_; ++i) h = mix(h, uint32_t(tokens[b * block_ + i]));
    touch(h);
  }
  while (capacity_ > 0 && int64_t(last_use_.size()) > capacity_) {
    auto victim = std::min_element(last_use_.begin(), last_use_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    last_use_.erase(victim);
  }
}

namespace {

struct ConvArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;
  int sessions = 16;
  int turns = 12;
  int system_tokens = 800;
  int user_min = 30, user_max = 150;
  int reply_min = 50, reply_max = 200;
  uint32_t seed = 1;
  int threads = default_thread_count();
  std::string json_out;
};

// One request of the replayed trace, as it ran.
struct Request {
  int session = 0, turn = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> computed_kv;  // prompt + reply minus its last token (KV exists)
  int64_t cached = 0, computed = 0;
  double ttft_ms = 0;
};

// Longest prefix of `p` whose KV some earlier request computed, capped at
// |p| - 1: the fewest tokens any cache could compute.
int64_t ideal_cached(const std::vector<Request>& done, const std::vector<int32_t>& p) {
  int64_t best = 0;
  for (const Request& r : done) {
    const auto& h = r.computed_kv;
    const int64_t n = std::min(h.size(), p.size());
    int64_t i = 0;
    while (i < n && h[i] == p[i]) ++i;
    best = std::max(best, i);
  }
  return std::min<int64_t>(best, int64_t(p.size()) - 1);
}

// Runs the trace through an engine with `kv_bytes` of KV memory.
std::vector<Request> replay(const Model& model, const ConvArgs& a, int64_t kv_bytes, const std::string& label) {
  Progress progress(label, int64_t(a.sessions) * a.turns);
  EngineOptions eo;
  eo.threads = a.threads;
  eo.kv_type = a.kv_type;
  eo.kv_memory_bytes = kv_bytes;
  Engine engine(model, eo);
  std::mt19937 rng(a.seed);
  const int32_t V = int32_t(model.config().n_vocab);
  std::uniform_int_distribution<int32_t> tok(3, V - 1);
  auto tokens = [&](int n) {
    std::vector<int32_t> v(n);
    for (int32_t& t : v) t = tok(rng);
    return v;
  };
  std::vector<int32_t> system{model.config().n_vocab > 1 ? 1 : 0};
  const auto sys = tokens(a.system_tokens - 1);
  system.insert(system.end(), sys.begin(), sys.end());
  std::vector<std::vector<int32_t>> conv(a.sessions, system);
  std::vector<Request> out;
  std::vector<int> order(a.sessions);
  for (int i = 0; i < a.sessions; ++i) order[i] = i;
  for (int t = 0; t < a.turns; ++t) {
    std::shuffle(order.begin(), order.end(), rng);  // interleave sessions
    for (int s : order) {
      const auto user = tokens(std::uniform_int_distribution<int>(a.user_min, a.user_max)(rng));
      const int reply = std::uniform_int_distribution<int>(a.reply_min, a.reply_max)(rng);
      Request r;
      r.session = s;
      r.turn = t;
      r.prompt = conv[s];
      r.prompt.insert(r.prompt.end(), user.begin(), user.end());
      GenerateRequest req;
      req.prompt = r.prompt;
      req.max_tokens = reply;
      req.stop_at_eog = false;
      const GenerateResult g = engine.generate(req);
      r.cached = g.n_cached;
      r.computed = g.n_computed;
      r.ttft_ms = g.ttft_ms;
      conv[s] = r.prompt;
      conv[s].insert(conv[s].end(), g.tokens.begin(), g.tokens.end());
      r.computed_kv.assign(conv[s].begin(), conv[s].end() - 1);
      out.push_back(std::move(r));
      progress.step("requests");
    }
  }
  return out;
}

struct Figures {
  std::string name;
  int64_t prompt = 0, computed = 0, ideal_computed = 0;
  std::vector<double> ttft_by_turn;  // mean per turn (ms); measured or estimated
  bool estimated = false;
};

// ttft ≈ a + b × computed, least squares over the engine's own requests.
std::pair<double, double> fit_cost(const std::vector<Request>& rs) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Request& r : rs) {
    n += 1;
    sx += r.computed;
    sy += r.ttft_ms;
    sxx += double(r.computed) * r.computed;
    sxy += r.computed * r.ttft_ms;
  }
  const double den = n * sxx - sx * sx;
  const double b = den != 0 ? (n * sxy - sx * sy) / den : 0;
  return {(sy - b * sx) / n, b};
}

std::vector<Figures> evaluate(const std::vector<Request>& rs, const ConvArgs& a, int64_t capacity_tokens) {
  Figures ours, vllm, lmc;
  ours.name = "promptcache (token radix)";
  vllm.name = "16-token block hashing (sim.)";
  lmc.name = "256-token chunk hashing (sim.)";
  vllm.estimated = lmc.estimated = true;
  BlockCacheSim b16(16, capacity_tokens ? capacity_tokens / 16 : 0);
  BlockCacheSim b256(256, capacity_tokens ? capacity_tokens / 256 : 0);
  const double c1 = fit_cost(rs).second;
  std::vector<double> sums[3];
  std::vector<int> counts(a.turns, 0);
  for (auto& v : sums) v.assign(a.turns, 0.0);
  std::vector<Request> done;
  for (const Request& r : rs) {
    const int64_t n = int64_t(r.prompt.size());
    const int64_t ideal = n - ideal_cached(done, r.prompt);
    const int64_t h16 = b16.lookup(r.prompt), h256 = b256.lookup(r.prompt);
    Figures* f[3] = {&ours, &vllm, &lmc};
    const int64_t comp[3] = {r.computed, n - h16, n - h256};
    for (int i = 0; i < 3; ++i) {
      f[i]->prompt += n;
      f[i]->computed += comp[i];
      f[i]->ideal_computed += ideal;
      // Baselines: our measured TTFT plus the marginal cost of the extra tokens
      // they compute (slope of our own TTFT against computed tokens).
      sums[i][r.turn] += r.ttft_ms + c1 * double(comp[i] - r.computed);
    }
    ++counts[r.turn];
    b16.insert(r.computed_kv);
    b256.insert(r.computed_kv);
    done.push_back(r);
  }
  Figures* f[3] = {&ours, &vllm, &lmc};
  for (int i = 0; i < 3; ++i)
    for (int t = 0; t < a.turns; ++t) f[i]->ttft_by_turn.push_back(counts[t] ? sums[i][t] / counts[t] : 0);
  return {ours, vllm, lmc};
}

nlohmann::json report(const std::string& title, const std::vector<Figures>& fs) {
  std::printf("\n%s\n", title.c_str());
  std::printf("  %-32s %10s %10s %10s %8s %12s %12s\n", "cache", "prompt", "computed", "ideal",
              "hit %", "TTFT turn 1", "TTFT last");
  nlohmann::json rows = nlohmann::json::array();
  for (const Figures& f : fs) {
    const double hit = f.prompt ? 100.0 * (f.prompt - f.computed) / f.prompt : 0;
    std::printf("  %-32s %10lld %10lld %10lld %7.1f%% %10.1f%s %10.1f%s\n", f.name.c_str(),
                (long long)f.prompt, (long long)f.computed, (long long)f.ideal_computed, hit,
                f.ttft_by_turn.front(), f.estimated ? "*" : " ", f.ttft_by_turn.back(),
                f.estimated ? "*" : " ");
    rows.push_back({{"cache", f.name}, {"prompt_tokens", f.prompt}, {"computed_tokens", f.computed},
                    {"ideal_computed_tokens", f.ideal_computed}, {"hit_rate", hit / 100},
                    {"ttft_ms_by_turn", f.ttft_by_turn}, {"ttft_estimated", f.estimated}});
  }
  std::printf("  TTFT by turn (ms):");
  for (double t : fs[0].ttft_by_turn) std::printf(" %.1f", t);
  std::printf("\n");
  return rows;
}

int run_conversation(const ConvArgs& a) {
  if (a.sessions < 1 || a.turns < 1 || a.system_tokens < 1 || a.user_min < 1 ||
      a.user_max < a.user_min || a.reply_min < 1 || a.reply_max < a.reply_min)
    throw Error("invalid trace shape");
  auto model = Model::load(a.model);
  const ModelConfig& c = model->config();
  const KvShape shape{int(c.n_layer), int(c.n_kv_head), int(c.head_dim), 16};
  // Working set: every session's final conversation, the system prompt once.
  const int64_t per_session = int64_t(a.turns) * ((a.user_max + a.user_min) / 2 + (a.reply_max + a.reply_min) / 2);
  const int64_t working_tokens = a.system_tokens + a.sessions * per_session;
  const int64_t working_bytes = working_tokens * int64_t(shape.bytes_per_token());
  std::printf("model: %s\n%s\ntrace: %d sessions x %d turns, system prompt %d tokens, user %d-%d, "
              "replies %d-%d tokens, seed %u; working set ~%lld tokens (%s KV)\n",
              a.model.c_str(), c.describe().c_str(), a.sessions, a.turns, a.system_tokens, a.user_min,
              a.user_max, a.reply_min, a.reply_max, a.seed, (long long)working_tokens,
              format_bytes(working_bytes).c_str());
  nlohmann::json j = {{"bench", "conversation"}, {"model", a.model}, {"sessions", a.sessions}, {"turns", a.turns},
                      {"system_tokens", a.system_tokens}, {"seed", a.seed}};
  const auto full = replay(*model, a, working_bytes * 2 + (64 << 20), "replay, whole working set");
  j["full_capacity"] = report("capacity: whole working set (* = estimated from our fitted prefill cost)",
                              evaluate(full, a, 0));
  // A quarter of the working set, but never less than the longest conversation
  // (plus its reply) needs, or that request could not run at all.
  int64_t longest = 0;
  for (const Request& r : full) longest = std::max<int64_t>(longest, r.computed_kv.size() + 1);
  const int64_t quarter_tokens = std::max<int64_t>(working_tokens / 4, longest + 64);
  // A hybrid model's snapshots share the KV memory: room for those on the path a
  // running request holds (at most one per part and reply: a session's 2 per turn, and
  // the request's own, EngineOptions::snapshots_per_sequence) besides the quarter.
  const int64_t snapshot_bytes =
      c.n_recurrent > 0 ? (2 * int64_t(a.turns) + EngineOptions{}.snapshots_per_sequence) *
                              ((RecurrentState(c).bytes() / int64_t(shape.bytes_per_page()) + 1) * int64_t(shape.bytes_per_page()))
                        : 0;
  const auto quarter = replay(*model, a, quarter_tokens * int64_t(shape.bytes_per_token()) + snapshot_bytes,
                              "replay, quarter working set");
  j["quarter_capacity"] = report("capacity: a quarter of the working set (" +
                                     std::to_string(quarter_tokens) + " tokens)",
                                 evaluate(quarter, a, quarter_tokens));
  if (!a.json_out.empty()) std::ofstream(a.json_out) << j.dump(2) << "\n";
  return 0;
}

}  // namespace

Run add_bench_conversation(CLI::App& bench) {
  auto a = std::make_shared<ConvArgs>();
  CLI::App* p = bench.add_subcommand("conversation",
                                     "Multi-turn chat trace: tokens computed vs ideal, hit rate, TTFT "
                                     "per turn, next to simulated block-hashing caches");
  p->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  p->add_option("--sessions", a->sessions, "Interleaved chat sessions")->capture_default_str();
  p->add_option("--turns", a->turns, "Turns per session")->capture_default_str();
  p->add_option("--system-tokens", a->system_tokens, "Shared system prompt length")->capture_default_str();
  p->add_option("--user-min", a->user_min, "Shortest user message")->capture_default_str();
  p->add_option("--user-max", a->user_max, "Longest user message")->capture_default_str();
  p->add_option("--reply-min", a->reply_min, "Shortest reply")->capture_default_str();
  p->add_option("--reply-max", a->reply_max, "Longest reply")->capture_default_str();
  p->add_option("--seed", a->seed, "Trace seed")->capture_default_str();
  add_kv_type_option(*p, &a->kv_type);
  p->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  p->add_option("--json", a->json_out, kBenchJsonHelp);
  return [a] { return run_conversation(*a); };
}

}  // namespace pc::cli
