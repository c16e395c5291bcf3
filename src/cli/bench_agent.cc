// `promptcache bench agent`: agent sessions whose requests change in the middle, over
// the HTTP API, with exact and approximate cache reuse side by side.
//
// Each session is a tool loop of --turns chat requests. Turn 1 sends a system prompt of
// about 400 words, 8 tool definitions and a user message whose content is 3 documents
// of about 250 words and a question — as text parts (--documents separate) or joined with
// blank lines in one string, as most RAG code sends them (--documents joined); every later turn appends the
// previous turn's assistant tool call and its result (about 120 words), and every 4th
// a new user question. The requests change in the middle the way agents change them:
//
//   turn 3   a tool is added to the tool list
//   turn 6   the oldest tool result is replaced by a one-line summary (compaction)
//   turn 8   the documents are re-ordered
//
// and the last session uses the Qwen3 template, whose assistant turns carry reasoning
// that the template drops once a new user question follows (history re-rendered).
//
// Per turn: prompt tokens, the tokens the server computed (prompt tokens neither
// reused exactly nor reused approximately), the ideal (prompt tokens never sent before
// in the session: tokens whose preceding 8-token window is new to the session), and
// time to the first streamed token; for `exact` and for `approximate` at the server's
// default budget (side by side: each turn is sent in both modes, one after the other, to
// one server, in a namespace per mode), and for a simulated 16-token block-hash prefix cache (a block hits
// when it and every block before it were in an earlier prompt of the session; its TTFT
// is estimated as its computed tokens at the exact run's per-token cost of that turn).
// In seconds: the median TTFT of the turns with a change over that of the turns without,
// per mode; approximate change turns against exact ones; and against what their computed
// tokens cost at a normal turn's per-token speed (exact, turns without a change), which
// is what everything else a change turn does (lookups, rotation, copies, the check pass)
// adds.
//
// The default model is a random-weight smollm-135m-shape Qwen2 model (30 layers), made
// once in --dir: a depth at which the per-layer costs of a change turn show.
// The assistant tool calls are written by the benchmark (a random-weight model's
// replies are not tool calls), so every one of them counts as new tokens.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <thread>
#include <unordered_set>
#include <vector>

#include <httplib.h>
#include <xxhash.h>

#include "cli/chat_stream.h"
#include "cli/commands.h"
#include "cli/kv_type_flag.h"
#include "cli/in_process_server.h"
#include "cli/progress.h"
#include "cli/units.h"
#include "common/error.h"
#include "kernels/cpu_count.h"
#include "model/make_model.h"
#include "server/server.h"

namespace pc::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchAgentArgs {
  KvType kv_type = KvType::kF16;  // --kv-type
  std::string model;  // "" = a generated model in `dir`
  std::string documents = "separate";  // separate: text parts; joined: one string
  std::string dir;
  std::string vocab = "../shared/vocab/ggml-vocab-qwen2.gguf";
  std::string template_file = "../shared/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja";
  std::string reasoning_template_file = "../shared/templates-2026/Qwen-Qwen3-0.6B.jinja";
  int sessions = 4;
  bool joined = false;
  int turns = 12;
  int max_tokens = 4;
  double budget = -1;  // < 0: the server's default
  std::string policy;  // "": the server's default
  int threads = default_thread_count();
  std::string kv_memory = "2GiB";  // both modes' KV, side by side
  std::string json_out;
  bool profile = false;  // print where each change turn's time went (promptcache.timings)
  bool verbose = false;  // print each turn's blocks and how the approximate run served them
};

// Deterministic text of `words` words from a small vocabulary, seeded by `seed`.
std::string words_text(uint64_t seed, int words) {
  static const char* vocab[] = {"the", "router", "signal", "customer", "reports", "that", "cable", "light",
                                "blinks", "after", "firmware", "update", "network", "ticket", "reset",
                                "button", "power", "manual", "warranty", "model", "port", "office",
                                "engineer", "checked", "replaced", "device", "status", "green", "red",
                                "slow", "connection", "drops", "every", "hour", "since", "monday"};
  std::string s;
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (int i = 0; i < words; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (i > 0) s += (i % 14 == 0 ? ". " : " ");
    s += vocab[x % (sizeof vocab / sizeof *vocab)];
  }
  return s + ".";
}

json tool_def(int k) {
  static const char* names[] = {"get_ticket", "search_kb", "run_diagnostic", "reset_device", "send_email",
                                "schedule_visit", "check_warranty", "escalate", "lookup_customer"};
  return {{"type", "function"},
          {"function",
           {{"name", names[k % 9]},
            {"description", words_text(1000 + k, 24)},
            {"parameters",
             {{"type", "object"},
              {"properties",
               {{"id", {{"type", "string"}, {"description", words_text(1100 + k, 6)}}},
                {"detail", {{"type", "string"}, {"description", words_text(1200 + k, 6)}}}}},
              {"required", json::array({"id"})}}}}}};
}

// One session's conversation state, and the request of each turn.
struct Session {
  int index = 0;
  bool reasoning = false;  // the Qwen3 session: assistant turns carry reasoning
  std::vector<std::string> docs;
  int n_tools = 8;
  std::vector<int> doc_order = {0, 1, 2};
  bool joined = false;  // the documents in one string, separated by blank lines
  json history = json::array();  // messages after the first user message
  int first_result = -1;         // index in history of the oldest tool result

  std::string salt() const { return "agent-" + std::to_string(index); }

  json first_user() const {
    if (joined) {
      std::string text;
      for (int d : doc_order) text += "Document " + std::to_string(d + 1) + ":\n" + docs[d] + "\n\n";
      return {{"role", "user"}, {"content", text + "The customer's router keeps dropping. What should we do?"}};
    }
    json content = json::array();
    for (int d : doc_order)
      content.push_back({{"type", "text"}, {"text", "Document " + std::to_string(d + 1) + ":\n" + docs[d] + "\n\n"}});
    content.push_back({{"type", "text"}, {"text", "The customer's router keeps dropping. What should we do?"}});
    return {{"role", "user"}, {"content", content}};
  }

  // Applies turn t's change and appends turn t-1's call and result; returns what changed.
  std::string advance(int t) {
    std::string change;
    if (t >= 2) {
      const std::string id = "call_" + std::to_string(index) + "_" + std::to_string(t - 1);
      const json call = {{"id", id},
                         {"type", "function"},
                         {"function",
                          {{"name", tool_def((t - 2) % n_tools)["function"]["name"]},
                           {"arguments", json{{"id", "T-" + std::to_string(4000 + t)}, {"detail", "step " + std::to_string(t)}}.dump()}}}};
      json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}};
      if (reasoning) assistant["reasoning_content"] = words_text(3000 + 100 * index + t, 40);
      history.push_back(assistant);
      if (first_result < 0) first_result = int(history.size());
      history.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", words_text(2000 + 100 * index + t, 120)}});
      if (t % 4 == 1)
        history.push_back({{"role", "user"}, {"content", "Thanks. Next: " + words_text(5000 + 100 * index + t, 12)}});
    }
    if (t == 3) {
      n_tools = 9;
      change = "tool added";
    } else if (t == 6 && first_result >= 0) {
      history[size_t(first_result)]["content"] = "(Summary: the ticket was found and the router was reset.)";
      change = "oldest result summarized";
    } else if (t == 8) {
      doc_order = {2, 0, 1};
      change = "documents re-ordered";
    }
    return change;
  }

  json messages() const {
    json m = json::array({{{"role", "system"}, {"content", words_text(900 + index, 400)}}, first_user()});
    for (const json& h : history) m.push_back(h);
    return m;
  }
  json tools() const {
    json t = json::array();
    for (int k = 0; k < n_tools; ++k) t.push_back(tool_def(k));
    return t;
  }
};

struct Turn {
  int session = 0, turn = 0;
  std::string change;
  int64_t prompt = 0, ideal = 0, block_hash = 0;
  int64_t computed[2] = {0, 0};  // exact, approximate
  double ttft_ms[2] = {0, 0};
  json timings[2];  // promptcache.timings per mode
  int64_t checked = 0;  // approximate: tokens the check pass ran through layer 0
  std::vector<std::string> block_lines;  // --verbose: the approximate run's blocks
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int32_t> prompt_ids(httplib::Client& cli, const json& body, std::string* error) {
  const httplib::Result r = cli.Post("/apply-template", body.dump(), "application/json");
  if (!r || r->status != 200) {
    *error = "/apply-template failed";
    return {};
  }
  const json t = {{"content", json::parse(r->body)["prompt"]}, {"add_special", true}, {"parse_special", true}};
  const httplib::Result k = cli.Post("/tokenize", t.dump(), "application/json");
  if (!k || k->status != 200) {
    *error = "/tokenize failed";
    return {};
  }
  return json::parse(k->body)["tokens"].get<std::vector<int32_t>>();
}

std::string detokenize(httplib::Client& cli, std::span<const int32_t> ids) {
  const json body = {{"tokens", std::vector<int32_t>(ids.begin(), ids.end())}};
  const httplib::Result r = cli.Post("/detokenize", body.dump(), "application/json");
  if (!r || r->status != 200) return "?";
  return json::parse(r->body).value("content", std::string("?"));
}

// A short printable excerpt: control characters escaped, at most `max` bytes.
std::string excerpt(const std::string& text, size_t max, bool tail) {
  std::string t = tail && text.size() > max ? text.substr(text.size() - max) : text.substr(0, max);
  std::string out;
  for (char ch : t) {
    if (ch == '\n') out += "\\n";
    else if (uint8_t(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out;
}

// --verbose: one line per block of the approximate run's plan (promptcache.blocks), runs
// of blocks from the exact prefix or a continuation folded into one line.
std::vector<std::string> block_lines(httplib::Client& cli, const std::vector<int32_t>& ids, const json& blocks) {
  std::vector<std::string> out;
  if (!blocks.is_array()) return out;
  for (size_t i = 0; i < blocks.size();) {
    const std::string src = blocks[i].value("source", std::string());
    const int32_t begin = blocks[i].value("begin", 0);
    size_t j = i + 1;
    if (src == "exact" || src == "continued")
      while (j < blocks.size() && blocks[j].value("source", std::string()) == src) ++j;
    const int32_t end = blocks[j - 1].value("end", 0);
    char head[96];
    std::snprintf(head, sizeof head, "    %-9s [%5d, %5d) %4d tokens%s", src.c_str(), begin, end, end - begin,
                  j - i > 1 ? (" in " + std::to_string(j - i) + " blocks").c_str() : "");
    std::string line = head;
    if (j - i == 1 && begin >= 0 && end <= int32_t(ids.size()) && begin < end) {
      const std::string text = detokenize(cli, std::span<const int32_t>(ids).subspan(size_t(begin), size_t(end - begin)));
      line += "  \"" + excerpt(text, 28, false) + "\" ... \"" + excerpt(text, 20, true) + "\"";
    }
    out.push_back(line);
    i = j;
  }
  return out;
}

// Client-side measures over a session's prompts: the ideal (tokens whose preceding
// 8-token window the session never sent) and a 16-token block-hash prefix cache.
struct SessionMeasure {
  std::unordered_set<uint64_t> windows, blocks;
  int64_t ideal(const std::vector<int32_t>& ids) {
    int64_t n = 0;
    std::vector<uint64_t> mine;
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t b = i >= 7 ? i - 7 : 0;
      const uint64_t h = XXH64(ids.data() + b, (i + 1 - b) * sizeof(int32_t), i < 7 ? i : 7);
      if (!windows.count(h)) ++n;
      mine.push_back(h);
    }
    windows.insert(mine.begin(), mine.end());
    return n;
  }
  int64_t block_hash(const std::vector<int32_t>& ids) {
    const size_t B = 16;
    uint64_t chain = 0;
    size_t hit = 0;
    bool hitting = true;
    std::vector<uint64_t> mine;
    for (size_t j = 0; (j + 1) * B <= ids.size(); ++j) {
      chain = XXH64(ids.data() + j * B, B * sizeof(int32_t), chain);
      mine.push_back(chain);
      if (hitting && blocks.count(chain) && (j + 1) * B < ids.size()) ++hit;  // the last token is computed
      else hitting = false;
    }
    blocks.insert(mine.begin(), mine.end());
    return int64_t(ids.size() - hit * B);
  }
};

std::string generated_model(const BenchAgentArgs& a) {
  namespace fs = std::filesystem;
  fs::create_directories(a.dir);
  const bool bpe = fs::exists(a.vocab);
  const fs::path path =
      fs::path(a.dir) / (bpe ? "agent-smollm-135m-qwen2-q8_0.gguf" : "agent-smollm-135m-bytes-q8_0.gguf");
  if (!fs::exists(path)) {
    std::fprintf(stderr, "generating a random-weight smollm-135m-shape model at %s ...\n", path.c_str());
    MakeModelOptions mo;
    mo.shape = "smollm-135m";
    mo.arch = bpe ? "qwen2" : "llama";
    mo.type = GgmlType::Q8_0;
    if (bpe) mo.vocab_path = a.vocab;
    mo.context_length = 16384;
    Progress progress("make-model", 0);
    mo.on_progress = progress.reporter();
    make_random_model(mo, path.string());
  }
  return path.string();
}

// Where each change turn's TTFT went, per mode (the server's promptcache.timings), and
// the approximate run's cost per computed token at that turn against a normal turn's.
void print_profile(const std::vector<Turn>& turns, double normal_ms_per_token, json& out) {
  std::printf("\nprofile of the turns with a change (ms; assembly = lookups + check pass + select + the rest of "
              "assembly; relocate = reused KV copied into the sequence with K rotated; other = TTFT - assembly - "
              "relocate - forward: HTTP, rendering, sampling, queueing)\n");
  std::printf("%3s %4s %-6s %6s %6s %8s | %8s %7s %8s %8s %8s %7s | %8s %6s %7s | %8s\n", "ses", "turn", "mode",
              "comp", "check", "TTFT", "assembly", "lookup", "relocate", "chk fwd", "chk scor", "select", "forward",
              "passes", "other", "x normal");
  out["profile"] = json::array();
  auto num = [](const json& j, const char* k) { return j.is_object() ? j.value(k, 0.0) : 0.0; };
  for (const Turn& r : turns) {
    if (r.change.empty() || r.turn == 1) continue;
    for (int m = 0; m < 2; ++m) {
      const json& t = r.timings[m];
      const double asm_ms = num(t, "assemble_ms"), fwd = num(t, "forward_ms");
      const double x = normal_ms_per_token > 0 && r.computed[m] > 0
                           ? r.ttft_ms[m] / (normal_ms_per_token * double(r.computed[m]))
                           : 0;
      std::printf("%3d %4d %-6s %6lld %6lld %8.1f | %8.1f %7.1f %8.1f %8.1f %8.1f %7.1f | %8.1f %6d %7.1f | %8.2f\n",
                  r.session, r.turn, m == 0 ? "exact" : "approx", (long long)r.computed[m],
                  (long long)(m == 1 ? r.checked : 0), r.ttft_ms[m], asm_ms, num(t, "lookup_ms"),
                  num(t, "relocate_ms"), num(t, "check_forward_ms"), num(t, "check_score_ms"), num(t, "select_ms"),
                  fwd, int(num(t, "forward_passes")), r.ttft_ms[m] - asm_ms - num(t, "relocate_ms") - fwd, x);
      out["profile"].push_back({{"session", r.session}, {"turn", r.turn}, {"change", r.change},
                                {"mode", m == 0 ? "exact" : "approximate"}, {"computed", r.computed[m]},
                                {"ttft_ms", r.ttft_ms[m]}, {"timings", t}, {"over_normal_per_token", x}});
    }
  }
}

int run_bench_agent(const BenchAgentArgs& a) {
  for (const std::string* f : {&a.template_file, &a.reasoning_template_file})
    if (!std::filesystem::exists(*f))
      throw Error("chat template " + *f + " not found (--chat-template-file / --reasoning-template-file; "
                  "the defaults are ../shared/templates-2026/ relative to the working directory)");
  std::signal(SIGPIPE, SIG_IGN);
  const std::string model = a.model.empty() ? generated_model(a) : a.model;
  std::vector<Turn> turns;
  std::string error;
  const char* mode_name[2] = {"exact", "approximate"};
  // One server per template. The two modes run side by side, turn by turn (exact, then
  // approximate), each in a namespace of its own (cache_salt), so a load that changes
  // during the run weighs on both alike.
  auto options = [&](const std::string& tmpl) {
    server::ServerOptions o;
    o.log_level = "warn";  // the bench prints its own figures, not a line per request
    o.model_path = model;
    o.port = 0;
    o.threads = a.threads;
    o.kv_type = a.kv_type;
    o.kv_memory_bytes = parse_bytes(a.kv_memory);
    o.chat_template_file = tmpl;
    return o;
  };
  InProcessServer plain(options(a.template_file)), reasoning(options(a.reasoning_template_file));
  Progress progress("turns", int64_t(a.sessions) * a.turns);
  for (int si = 0; si < a.sessions; ++si) {
    Session s;
    s.index = si;
    s.reasoning = si == a.sessions - 1;
    s.joined = a.joined;
    for (int d = 0; d < 3; ++d) s.docs.push_back(words_text(700 + 10 * si + d, 250));
    httplib::Client cli("127.0.0.1", s.reasoning ? reasoning.port : plain.port);
    cli.set_read_timeout(600);
    SessionMeasure measure;
    for (int t = 1; t <= a.turns; ++t) {
      const std::string change = s.advance(t);
      json body = {{"messages", s.messages()}, {"tools", s.tools()}, {"max_tokens", a.max_tokens},
                   {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
      turns.emplace_back();
      turns.back().session = si;
      turns.back().turn = t;
      turns.back().change = change;
      Turn* row = &turns.back();
      const std::vector<int32_t> ids = prompt_ids(cli, body, &error);
      if (!error.empty()) throw Error("bench agent: " + error);
      row->prompt = int64_t(ids.size());
      row->ideal = measure.ideal(ids);
      row->block_hash = measure.block_hash(ids);
      for (int mode = 0; mode < 2; ++mode) {
        body["cache_reuse"] = mode_name[mode];
        body["cache_salt"] = s.salt() + "-" + mode_name[mode];
        if (mode == 1 && a.budget >= 0) body["cache_reuse_budget"] = a.budget;
        if (mode == 1 && !a.policy.empty()) body["cache_reuse_policy"] = a.policy;
        if (mode == 1 && a.verbose) body["cache_reuse_blocks"] = true;
        const StreamedChat c = stream_chat(cli, body.dump());
        error = c.error;
        if (!error.empty()) throw Error(std::string("bench agent: ") + mode_name[mode] + " session " +
                                        std::to_string(si) + " turn " + std::to_string(t) + ": " + error);
        const json pc = c.promptcache.is_object() ? c.promptcache : json::object();
        const int64_t prompt = c.usage.value("prompt_tokens", int64_t(0));
        if (prompt != row->prompt) {
          progress.clear();
          std::fprintf(stderr, "warning: session %d turn %d: %lld prompt tokens, /tokenize said %lld\n", si, t,
                       (long long)prompt, (long long)row->prompt);
        }
        row->computed[mode] = prompt - pc.value("cached_tokens", int64_t(0)) - pc.value("approximate_tokens", int64_t(0));
        row->ttft_ms[mode] = c.ttft_ms;
        row->timings[mode] = pc.value("timings", json::object());
        if (mode == 1) row->checked = pc.value("checked_tokens", int64_t(0));
        if (mode == 1 && a.verbose) row->block_lines = block_lines(cli, ids, pc.value("blocks", json::array()));
      }
      progress.step("turns (session " + std::to_string(si + 1) + "/" + std::to_string(a.sessions) + ")");
    }
  }

  // Per turn (summed over sessions, TTFT averaged), then totals.
  json out = {{"bench", "agent"}, {"model", model}, {"sessions", a.sessions}, {"turns", a.turns},
              {"documents", a.documents}, {"rows", json::array()}};
  std::printf("bench agent: %s, %d sessions x %d turns, documents %s (the last session on the reasoning "
              "template)\n\n", model.c_str(), a.sessions, a.turns, a.documents.c_str());
  std::printf("%4s  %-26s %7s %7s | %9s %9s %9s | %9s %9s %9s\n", "turn", "change", "prompt", "ideal",
              "blockhash", "exact", "approx", "hash ms*", "exact ms", "approx ms");
  int64_t tot_prompt = 0, tot_ideal = 0, tot_hash = 0, tot[2] = {0, 0};
  double tot_ms[3] = {0, 0, 0};
  // Per session and turn after the first (turn 1 computes everything in every mode).
  std::vector<double> change_ms[3], plain_ms[3], plain_ms_per_token[2];
  std::vector<const Turn*> change_rows;
  for (const Turn& r : turns) {
    const double hash_ms = r.computed[0] > 0 ? r.ttft_ms[0] * double(r.block_hash) / double(r.computed[0]) : 0;
    if (r.turn == 1) continue;
    const double ms[3] = {r.ttft_ms[0], r.ttft_ms[1], hash_ms};
    for (int m = 0; m < 3; ++m) (r.change.empty() ? plain_ms : change_ms)[m].push_back(ms[m]);
    for (int m = 0; m < 2; ++m)
      if (r.change.empty() && r.computed[m] > 0) plain_ms_per_token[m].push_back(r.ttft_ms[m] / double(r.computed[m]));
    if (!r.change.empty()) change_rows.push_back(&r);
  }
  // A normal turn's cost per computed token, measured in the same mode's run (the two
  // modes run one after the other, so each is compared with what its own run measured).
  const double per_token = median(plain_ms_per_token[1]);
  std::vector<double> over_compute;  // approximate change turns: TTFT / their computed tokens' cost
  for (const Turn* r : change_rows)
    if (per_token > 0 && r->computed[1] > 0) over_compute.push_back(r->ttft_ms[1] / (per_token * double(r->computed[1])));
  for (int t = 1; t <= a.turns; ++t) {
    int64_t prompt = 0, ideal = 0, hash = 0, comp[2] = {0, 0};
    double ms[3] = {0, 0, 0};
    std::string change;
    int n = 0;
    for (const Turn& r : turns) {
      if (r.turn != t) continue;
      prompt += r.prompt, ideal += r.ideal, hash += r.block_hash;
      for (int m = 0; m < 2; ++m) comp[m] += r.computed[m], ms[m] += r.ttft_ms[m];
      ms[2] += r.computed[0] > 0 ? r.ttft_ms[0] * double(r.block_hash) / double(r.computed[0]) : 0;
      if (!r.change.empty()) change = r.change;
      ++n;
    }
    for (int m = 0; m < 3; ++m) tot_ms[m] += ms[m];
    for (int m = 0; m < 3; ++m) ms[m] /= std::max(1, n);
    std::printf("%4d  %-26s %7lld %7lld | %9lld %9lld %9lld | %9.1f %9.1f %9.1f\n", t, change.c_str(),
                (long long)prompt, (long long)ideal, (long long)hash, (long long)comp[0], (long long)comp[1], ms[2],
                ms[0], ms[1]);
    out["rows"].push_back({{"turn", t}, {"change", change}, {"prompt_tokens", prompt}, {"ideal_tokens", ideal},
                           {"block_hash_computed", hash}, {"exact_computed", comp[0]},
                           {"approximate_computed", comp[1]}, {"exact_ttft_ms", ms[0]},
                           {"approximate_ttft_ms", ms[1]}, {"block_hash_ttft_ms", ms[2]}});
    tot_prompt += prompt, tot_ideal += ideal, tot_hash += hash;
    for (int m = 0; m < 2; ++m) tot[m] += comp[m];
  }
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  std::printf("%4s  %-26s %7lld %7lld | %9lld %9lld %9lld | %9.0f %9.0f %9.0f\n", "all", "", (long long)tot_prompt,
              (long long)tot_ideal, (long long)tot_hash, (long long)tot[0], (long long)tot[1], tot_ms[2], tot_ms[0],
              tot_ms[1]);
  std::printf("* estimated: the block-hash cache's computed tokens at the exact run's cost per token of the turn\n");
  std::printf("\ncomputed / ideal: block-hash %.2f, exact %.2f, approximate %.2f\n", ratio(tot_hash, tot_ideal),
              ratio(tot[0], tot_ideal), ratio(tot[1], tot_ideal));
  const char* names[3] = {"exact", "approximate", "block-hash*"};
  json medians = json::object();
  for (int m = 0; m < 3; ++m) {
    const double c = median(change_ms[m]), p = median(plain_ms[m]);
    std::printf("%-12s median TTFT of turns with a change / without: %8.1f / %7.1f ms = %5.2f\n", names[m], c, p,
                ratio(c, p));
    medians[m == 2 ? "block_hash" : mode_name[m]] = {{"change_ttft_ms", c}, {"plain_ttft_ms", p}, {"ratio", ratio(c, p)}};
  }
  const double approx_over_exact = ratio(median(change_ms[1]), median(change_ms[0]));
  const double over = median(over_compute);
  std::printf("approximate change turns: median TTFT %.2f x exact's change turns; %.2f x what their computed tokens "
              "cost at a normal turn's %.2f ms/token\n", approx_over_exact, over, per_token);
  out["medians"] = medians;
  out["totals"] = {{"prompt_tokens", tot_prompt},
                   {"ideal_tokens", tot_ideal},
                   {"block_hash_computed", tot_hash},
                   {"exact_computed", tot[0]},
                   {"approximate_computed", tot[1]},
                   {"exact_over_ideal", ratio(tot[0], tot_ideal)},
                   {"approximate_over_ideal", ratio(tot[1], tot_ideal)},
                   {"block_hash_over_ideal", ratio(tot_hash, tot_ideal)},
                   {"exact_ttft_ms", tot_ms[0]},
                   {"approximate_ttft_ms", tot_ms[1]},
                   {"block_hash_ttft_ms", tot_ms[2]},
                   {"exact_normal_ms_per_token", median(plain_ms_per_token[0])},
                   {"approximate_normal_ms_per_token", per_token},
                   {"approximate_change_over_exact_change", approx_over_exact},
                   {"approximate_change_over_compute", over}};
  if (a.profile) print_profile(turns, per_token, out);
  if (a.verbose) {
    std::printf("\nblocks of the approximate run (exact: the exact prefix; continued: an earlier approximate "
                "request's KV; found: at another position in the block index; computed: not found)\n");
    for (const Turn& r : turns) {
      std::printf("session %d turn %d%s%s: %lld computed of %lld\n", r.session, r.turn, r.change.empty() ? "" : ", ",
                  r.change.c_str(), (long long)r.computed[1], (long long)r.prompt);
      for (const std::string& l : r.block_lines) std::printf("%s\n", l.c_str());
    }
  }
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}

}  // namespace

Run add_bench_agent(CLI::App& bench) {
  auto a = std::make_shared<BenchAgentArgs>();
  CLI::App* c = bench.add_subcommand(
      "agent", "Agent tool-loop sessions whose requests change in the middle (a tool added, a result "
               "compacted, documents re-ordered, reasoning dropped) over HTTP: tokens computed vs the "
               "ideal and TTFT per turn, for exact and approximate reuse and a simulated block-hash cache");
  c->add_option("-m,--model", a->model,
                "GGUF model (default: a generated random-weight smollm-135m-shape Qwen2 model, 30 layers, made "
                "once in --dir)")
      ->check(CLI::ExistingFile);
  c->add_option("--documents", a->documents,
                "The first user message's 3 documents: separate (text parts) or joined (one string, blank lines "
                "between them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"separate", "joined"}));
  const char* home = std::getenv("HOME");
  a->dir = std::string(home ? home : "/tmp") + "/.cache/promptcache";
  c->add_option("--dir", a->dir, "Where the generated model is kept")->capture_default_str();
  c->add_option("--vocab", a->vocab, "Tokenizer of the generated model (byte-level when the file is missing)")
      ->capture_default_str();
  c->add_option("--chat-template-file", a->template_file, "Template of every session but the last")
      ->capture_default_str();
  c->add_option("--reasoning-template-file", a->reasoning_template_file,
                "Template of the last session (one that drops earlier reasoning)")
      ->capture_default_str();
  c->add_option("--sessions", a->sessions, "Sessions")->capture_default_str()->check(CLI::Range(1, 64));
  c->add_option("--turns", a->turns, "Turns per session")->capture_default_str()->check(CLI::Range(1, 64));
  c->add_option("--max-tokens", a->max_tokens, "Tokens generated per turn")->capture_default_str()->check(CLI::Range(1, 1024));
  c->add_option("--budget", a->budget, "cache_reuse_budget of the approximate run (default: the server's)")
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--policy", a->policy, "cache_reuse_policy of the approximate run (default: the server's)")
      ->check(CLI::IsMember({"prefix", "deviation", "impact"}));
  add_kv_type_option(*c, &a->kv_type);
  c->add_option("-t,--threads", a->threads, kThreadsHelp)->capture_default_str()->check(CLI::Range(1, 256));
  c->add_option("--kv-memory", a->kv_memory, "Server KV cache memory")->capture_default_str();
  c->add_option("--json", a->json_out, kBenchJsonHelp);
  c->add_flag("--profile", a->profile,
              "Also print where each change turn's time went, per mode: assembly (block lookups, page copies "
              "with K rotated, the check pass, the policy's choice), forward passes, the rest (HTTP, "
              "rendering, sampling)");
  c->add_flag("-v,--verbose", a->verbose,
              "Also print, per turn, each block of the approximate run's prompt (a request part or a content "
              "chunk of a long one) and whether its KV came from the exact prefix, was found at another "
              "position, or was computed");
  return [a] {
    a->joined = a->documents == "joined";
    return run_bench_agent(*a);
  };
}

}  // namespace pc::cli
