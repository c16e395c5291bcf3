// The promptcache executable, run as a user would.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>
#include <sys/wait.h>

#include "kernels/cpu.h"
#include "model/make_model.h"
#include "test_util.h"

namespace pc {
namespace {

struct CmdResult {
  int status;
  std::string out;  // stdout and stderr together
};

// A shell command line; its stdout (and what it sends there) through a pipe.
CmdResult run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  CmdResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The CLI with `args`, stdout and stderr through one pipe. env: variable
// assignments for the command ("NAME=value ...").
CmdResult run(const std::string& args, const std::string& env = "") {
  return run_shell((env.empty() ? "" : "env " + env + " ") + test::cli_path() + " " + args + " 2>&1");
}

// Carriage returns or escape sequences: what a progress line is drawn with.
bool has_terminal_controls(const std::string& out) { return out.find_first_of("\r\x1b") != std::string::npos; }

const std::string kStories = test::shared_dir() + "/models/stories260K.gguf";

// The JSON a command wrote to `path`.
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Cli, GenerateStreamsTextAndTimings) {
  CmdResult r = run("generate -m " + kStories + " -p 'Once upon a time' -n 20 --threads 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("timings: prompt 5 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated 20 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode"), std::string::npos);
}

TEST(Cli, GenerateIsDeterministicForASeed) {
  const std::string args = "generate -m " + kStories + " -p 'Lily' -n 24 --temp 0.9 --top-k 40 --top-p 0.9 --seed 11";
  CmdResult a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.out;
  const std::string ta = a.out.substr(0, a.out.find("timings:"));
  const std::string tb = b.out.substr(0, b.out.find("timings:"));
  EXPECT_EQ(ta, tb);
  CmdResult c = run("generate -m " + kStories + " -p 'Lily' -n 24 --temp 0.9 --top-k 40 --top-p 0.9 --seed 12");
  EXPECT_NE(ta, c.out.substr(0, c.out.find("timings:")));
}

TEST(Cli, GenerateFileRunsRequestsThroughOneCache) {
  const std::string f = test::temp_dir() + "/reqs.jsonl";
  FILE* out = fopen(f.c_str(), "w");
  fputs("{\"prompt\": \"Once upon a time\", \"max_tokens\": 8}\n"
        "# a comment, then a blank line\n\n"
        "{\"prompt\": \"Once upon a time there was\", \"max_tokens\": 4}\n",
        out);
  fclose(out);
  CmdResult r = run("generate -m " + kStories + " -f " + f);
  ASSERT_EQ(r.status, 0) << r.out;
  // "Once upon a time" is BOS + 4 tokens; the second prompt shares them.
  EXPECT_NE(r.out.find("prompt 5 tokens (0 cached, 5 computed)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(5 cached,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total: 2 requests"), std::string::npos) << r.out;
  const std::string bad = test::temp_dir() + "/bad.jsonl";
  out = fopen(bad.c_str(), "w");
  fputs("{\"prompt\": \"ok\"}\n{not json\n", out);
  fclose(out);
  CmdResult e = run("generate -m " + kStories + " -f " + bad);
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.out.find("bad.jsonl:2: invalid JSON"), std::string::npos) << e.out;
}

TEST(Cli, PmlCheckAndGenerate) {
  const std::string dir = test::temp_dir();
  FILE* f = fopen((dir + "/s.pml").c_str(), "w");
  fputs("<schema name=\"s\">Once upon a time <module name=\"dog\">there was a dog.</module>"
        "<module name=\"cat\">there was a cat.</module></schema>", f);
  fclose(f);
  f = fopen((dir + "/p.pml").c_str(), "w");
  fputs("<prompt schema=\"s\"><cat/> The cat</prompt>", f);
  fclose(f);
  f = fopen((dir + "/bad.pml").c_str(), "w");
  fputs("<prompt schema=\"s\">\n  <cow/> x</prompt>", f);
  fclose(f);
  CmdResult c = run("pml check -m " + kStories + " " + dir + "/s.pml " + dir + "/p.pml");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("dog"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("cat"), std::string::npos) << c.out;
  CmdResult g = run("generate -m " + kStories + " --schema " + dir + "/s.pml -p " + dir + "/p.pml -n 6");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("modules: 0 cached, 2 encoded"), std::string::npos) << g.out;  // root + cat
  EXPECT_NE(g.out.find("generated 6 tokens"), std::string::npos) << g.out;
  CmdResult e = run("pml check -m " + kStories + " " + dir + "/s.pml " + dir + "/bad.pml");
  EXPECT_EQ(e.status, 1);
  EXPECT_NE(e.out.find("line 2, column 3"), std::string::npos) << e.out;
}

TEST(Cli, DemoShowsPrefixReuse) {
  CmdResult r = run("demo --dir " + test::temp_dir() + " --shared " + test::shared_dir());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(" 0 cached,"), std::string::npos) << r.out;   // the cold request
  EXPECT_NE(r.out.find("627 cached,"), std::string::npos) << r.out;  // the follow-up
  EXPECT_NE(r.out.find("Once upon a time"), std::string::npos) << r.out;
}

TEST(Cli, InspectPrintsMetadataAndTensors) {
  CmdResult r = run("inspect " + kStories);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("llama.block_count"), std::string::npos);
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
}

TEST(Cli, MakeModelThenGenerate) {
  const std::string out = test::temp_dir() + "/m.gguf";
  CmdResult r = run("make-model --shape tiny --arch qwen3 --type Q4_0 --vocab " + test::shared_dir() +
              "/vocab/ggml-vocab-qwen2.gguf -o " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  CmdResult g = run("generate -m " + out + " -p 'hello world' -n 5");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("generated 5 tokens"), std::string::npos) << g.out;
}

TEST(Cli, ErrorsAreMessagesNotCrashes) {
  CmdResult r = run("make-model --shape nope --vocab " + kStories + " -o /tmp/x.gguf");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
  const std::string bad = test::temp_dir() + "/bad.gguf";
  FILE* f = fopen(bad.c_str(), "wb");
  fputs("GGUF\x03", f);
  fclose(f);
  CmdResult g = run("generate -m " + bad + " -p hi");
  EXPECT_EQ(g.status, 1) << g.out;
  EXPECT_NE(g.out.find("error:"), std::string::npos) << g.out;
  CmdResult h = run("generate --help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("--kv-memory"), std::string::npos);
  // Benchmark options out of range are refused up front, naming the option
  // (they used to print an empty table, or a TTFT of 1e30 for --repeat 0).
  for (const char* bad : {"--tokens 0", "--tokens 512,-5", "--decode -1", "--repeat 0", "--threads 0", "--batch-tokens 0"}) {
    CmdResult b = run("bench prefill -m " + kStories + " " + bad);
    EXPECT_NE(b.status, 0) << bad << ": " << b.out;
    EXPECT_NE(b.out.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << b.out;
    EXPECT_EQ(b.out.find("tok/s"), std::string::npos) << bad << ": " << b.out;
  }
  // --kv-type: explained in --help; an unknown type, or one the model's heads cannot
  // take, is an error naming the flag.
  EXPECT_NE(h.out.find("--kv-type"), std::string::npos);
  EXPECT_NE(h.out.find("q8_0"), std::string::npos);
  CmdResult kt = run("generate -m " + kStories + " -p hi --kv-type q5_1");
  EXPECT_NE(kt.status, 0) << kt.out;
  EXPECT_NE(kt.out.find("--kv-type"), std::string::npos) << kt.out;
  EXPECT_NE(kt.out.find("q5_1"), std::string::npos) << kt.out;
  CmdResult kh = run("generate -m " + test::shared_dir() + "/models/llama-2-tiny-random.gguf -p hi --kv-type q8_0");
  EXPECT_EQ(kh.status, 1) << kh.out;
  EXPECT_NE(kh.out.find("--kv-type q8_0"), std::string::npos) << kh.out;
  CmdResult ks = run("serve -m " + kStories + " --kv-type Q8");
  EXPECT_NE(ks.status, 0) << ks.out;
  EXPECT_NE(ks.out.find("--kv-type"), std::string::npos) << ks.out;
  CmdResult m = run("bench modules -m " + kStories + " --docs 1");
  EXPECT_NE(m.status, 0) << m.out;
  EXPECT_NE(m.out.find("--docs"), std::string::npos) << m.out;
}

// `bench prefill` with --decode 0 reports the prompt rate and no TTFT or decode
// rate (no token is generated: they used to print as 0.0), in the table and as
// JSON nulls; with --decode the three figures are there.
TEST(Cli, BenchPrefillWithoutDecode) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 16 --decode 0 --json " + dir + "/p.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(has_terminal_controls(r.out)) << r.out;
  EXPECT_EQ(r.out.find(" 0.0"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/p.json");
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_GT(j["results"][0]["prompt_tokens_per_s"].get<double>(), 0.0);
  EXPECT_TRUE(j["results"][0]["ttft_ms"].is_null());
  EXPECT_TRUE(j["results"][0]["decode_tokens_per_s"].is_null());
  CmdResult d = run("bench prefill -m " + kStories + " --tokens 16 --decode 3 --json " + dir + "/d.json");
  ASSERT_EQ(d.status, 0) << d.out;
  const nlohmann::json dj = read_json(dir + "/d.json");
  EXPECT_GT(dj["results"][0]["ttft_ms"].get<double>(), 0.0);
  EXPECT_GT(dj["results"][0]["decode_tokens_per_s"].get<double>(), 0.0);
}

// `bench prefill --repeat N` prints the medians of the N runs under each row
// (the row itself has the best), the same medians as the JSON's.
TEST(Cli, BenchPrefillRepeatPrintsMedians) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 16 --decode 3 --repeat 3 --no-bandwidth "
                    "--no-int8-peak --json " + dir + "/m.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json row = read_json(dir + "/m.json")["results"][0];
  char want[160];
  std::snprintf(want, sizeof want, "medians of 3: prompt %.1f tok/s (TTFT %.1f ms), decode %.1f tok/s",
                row["prompt_tokens_per_s_median"].get<double>(), row["ttft_ms_median"].get<double>(),
                row["decode_tokens_per_s_median"].get<double>());
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  ASSERT_EQ(row["decode_tokens_per_s_runs"].size(), 3u);
  std::vector<double> runs = row["decode_tokens_per_s_runs"].get<std::vector<double>>();
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(row["decode_tokens_per_s_median"].get<double>(), runs[1]);
  EXPECT_LE(row["decode_tokens_per_s_median"].get<double>(), row["decode_tokens_per_s"].get<double>());
  CmdResult once = run("bench prefill -m " + kStories + " --tokens 16 --decode 3 --no-bandwidth --no-int8-peak");
  ASSERT_EQ(once.status, 0) << once.out;
  EXPECT_EQ(once.out.find("medians of"), std::string::npos) << once.out;
}

// `bench prefill --cached N` times prompts that follow a cached prefix of N
// tokens (a turn in a long conversation): the prefix is computed once per
// engine, every run of every length and KV type reuses all N tokens (so only
// its own tokens are computed and timed), and the JSON says so row by row.
TEST(Cli, BenchPrefillAfterACachedPrefix) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --cached 100 --tokens 16,64 --decode 2 --repeat 2 "
                    "--kv-type f16 q8_0 --no-bandwidth --no-int8-peak --json " + dir + "/c.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("cached prefix of 100 tokens"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/c.json");
  EXPECT_EQ(j["cached"].get<int>(), 100);
  ASSERT_EQ(j["results"].size(), 4u);  // 2 lengths x 2 KV types
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["cached_tokens"].get<int64_t>(), 100) << row.dump();
    EXPECT_GT(row["prompt_tokens_per_s"].get<double>(), 0.0) << row.dump();
    EXPECT_GT(row["ttft_ms"].get<double>(), 0.0) << row.dump();
  }
  CmdResult plain = run("bench prefill -m " + kStories + " --tokens 16 --decode 0 --no-bandwidth --no-int8-peak "
                        "--json " + dir + "/p.json");
  ASSERT_EQ(plain.status, 0) << plain.out;
  EXPECT_EQ(plain.out.find("cached prefix"), std::string::npos) << plain.out;
  const nlohmann::json pj = read_json(dir + "/p.json");
  EXPECT_EQ(pj["cached"].get<int>(), 0);
  EXPECT_FALSE(pj["results"][0].contains("cached_tokens"));
  CmdResult bad = run("bench prefill -m " + kStories + " --cached -5");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("--cached"), std::string::npos) << bad.out;
}

// `bench prefill --attn-prefetch on off` measures decode with and without the
// attention's KV prefetch, interleaved in one process: a row of each in the
// table and the JSON, and their ratio; a value other than on / off is refused
// naming the option.
TEST(Cli, BenchPrefillAttnPrefetchSideBySide) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 40 --decode 4 --attn-prefetch on off --no-bandwidth "
                    "--json " + dir + "/pf.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("(prefetch on) vs"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/pf.json");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_TRUE(j["results"][0]["attn_prefetch"].get<bool>());
  EXPECT_FALSE(j["results"][1]["attn_prefetch"].get<bool>());
  for (const auto& row : j["results"]) EXPECT_GT(row["decode_tokens_per_s"].get<double>(), 0.0);
  CmdResult bad = run("bench prefill -m " + kStories + " --attn-prefetch maybe");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("--attn-prefetch"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("tok/s"), std::string::npos) << bad.out;
}

// `bench prefill` sets a quantized model's prompt rate against the machine's int8
// multiply-add peak (weights x tokens/s, a share of the peak below 1), per kernel
// level measured; float weights do no int8 work and get no share; --no-int8-peak
// skips the measurement.
TEST(Cli, BenchPrefillReportsTheInt8PeakShare) {
  const std::string dir = test::temp_dir();
  const std::string q8 = test::shared_dir() + "/models/TinyStories-656K-Q8_0.gguf";
  CmdResult r = run("bench prefill -m " + q8 + " --tokens 32 --decode 0 --json " + dir + "/q.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = read_json(dir + "/q.json");
  const std::string best = cpu_level_name(detect_cpu_level());
  if (detect_cpu_level() == CpuLevel::Scalar) {
    EXPECT_TRUE(j["int8_peak"].empty()) << j.dump();
  } else {
    EXPECT_GT(j["int8_peak"][best]["gmacs"].get<double>(), 0.0) << j.dump();
    const double share = j["results"][0]["int8_peak_share"].get<double>();
    EXPECT_GT(share, 0.0);
    EXPECT_LT(share, 1.0);
    EXPECT_NE(r.out.find("% of the peak"), std::string::npos) << r.out;
  }
  CmdResult f = run("bench prefill -m " + kStories + " --tokens 8 --decode 0 --json " + dir + "/f.json");
  ASSERT_EQ(f.status, 0) << f.out;
  const nlohmann::json fj = read_json(dir + "/f.json");
  EXPECT_FALSE(fj["results"][0].contains("int8_peak_share")) << fj.dump();
  CmdResult n = run("bench prefill -m " + q8 + " --tokens 8 --decode 0 --no-int8-peak --json " + dir + "/n.json");
  ASSERT_EQ(n.status, 0) << n.out;
  EXPECT_TRUE(read_json(dir + "/n.json")["int8_peak"].is_null());
}

// --no-repack keeps the weights in the file's layout: the same greedy text as the
// repacked default, and `bench prefill` says which layout each type took under
// each --repack mode. (The test model's weights are too few to be timed: auto
// repacks them as all does.)
TEST(Cli, NoRepackKeepsTheStoredLayoutWithTheSameText) {
  const std::string q8 = test::shared_dir() + "/models/TinyStories-656K-Q8_0.gguf";
  const std::string args = "generate -m " + q8 + " -p 'Once upon a time' -n 24 --temp 0 --threads 2";
  CmdResult a = run(args), b = run(args + " --no-repack"), c = run(args + " --repack all");
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(a.out.substr(0, a.out.find("timings:")), b.out.substr(0, b.out.find("timings:")));
  EXPECT_EQ(a.out.substr(0, a.out.find("timings:")), c.out.substr(0, c.out.find("timings:")));
  const std::string dir = test::temp_dir();
  const bool simd = detect_cpu_level() != CpuLevel::Scalar;
  struct Mode {
    const char* flags;
    const char* name;
    bool repacked;
  };
  for (const Mode& m : {Mode{"", "auto", simd}, Mode{" --repack all", "all", simd}, Mode{" --no-repack", "none", false},
                        Mode{" --repack none", "none", false}}) {
    const std::string json = dir + "/r.json";
    CmdResult r = run("bench prefill -m " + q8 + " --tokens 8 --decode 2 --no-int8-peak --no-bandwidth --json " + json +
                      m.flags);
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = read_json(json);
    EXPECT_EQ(j["repack"], m.name) << m.flags;
    EXPECT_NE(r.out.find(std::string("repack ") + m.name), std::string::npos) << r.out;
    // Every matmul weight of this model is Q8_0: one type, all repacked or none.
    const std::string want = m.repacked ? "Q8_0: Q8_0_X16 (" : "Q8_0: as stored (";
    ASSERT_EQ(j["weights"].size(), 1u) << j.dump();
    EXPECT_EQ(j["weights"][0].get<std::string>().rfind(want, 0), 0u) << j.dump();
    EXPECT_NE(r.out.find("weights: " + want), std::string::npos) << r.out;
    EXPECT_TRUE(j["layout_timings"].empty()) << j.dump();
    // The load time, repacking included, in the text and the JSON.
    ASSERT_EQ(j["load_ms"].size(), 1u) << j.dump();
    EXPECT_GT(j["load_ms"][0].get<double>(), 0.0);
    EXPECT_NE(r.out.find("(loaded in "), std::string::npos) << r.out;
  }
  CmdResult bad = run(args + " --repack sometimes");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--repack"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("sometimes"), std::string::npos) << bad.out;
}

// `bench prefill` and `bench conversation` run on every 2026 architecture (the arch2
// fixtures: MoE, hybrid dense and MoE, gpt-oss), and --compare measures two models
// side by side with the medians' ratio.
TEST(Cli, BenchPrefillAndConversationRunOnEveryNewArchitecture) {
  const std::string dir = test::temp_dir();
  for (const char* name : {"qwen3moe-tiny", "qwen35-tiny", "qwen35moe-tiny", "gpt-oss-tiny"}) {
    const std::string m = test::shared_dir() + "/models/arch2/" + name + ".gguf";
    CmdResult p = run("bench prefill -m " + m + " --tokens 40 --decode 4 --no-bandwidth --json " + dir + "/p.json");
    ASSERT_EQ(p.status, 0) << name << ": " << p.out;
    const nlohmann::json j = read_json(dir + "/p.json");
    EXPECT_GT(j["results"][0]["decode_tokens_per_s"].get<double>(), 0.0) << name;
    CmdResult c = run("bench conversation -m " + m + " --sessions 2 --turns 2 --system-tokens 40 --user-max 40 "
                      "--reply-max 60");
    ASSERT_EQ(c.status, 0) << name << ": " << c.out;
    EXPECT_NE(c.out.find("promptcache (token radix)"), std::string::npos) << name << ": " << c.out;
  }
  const std::string moe = test::shared_dir() + "/models/arch2/qwen3moe-tiny.gguf";
  CmdResult r = run("bench prefill -m " + moe + " --compare " + kStories +
                    " --tokens 8 --decode 3 --repeat 3 --no-bandwidth --json " + dir + "/c.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("medians of 3: decode"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/c.json");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["model"], 1);
  EXPECT_EQ(j["results"][1]["decode_tokens_per_s_runs"].size(), 3u);
  EXPECT_EQ(j["models"].size(), 2u);
}

// `bench prefill --kernels` measures several CPU code paths in one process, a
// row per path and length; a path the CPU cannot run, or an unknown name, is
// an error before anything runs.
TEST(Cli, BenchPrefillKernelsSideBySide) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 8,16 --decode 2 --kernels scalar,auto --json " + dir +
                    "/k.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = read_json(dir + "/k.json");
  ASSERT_EQ(j["results"].size(), 4u);
  const std::string best = cpu_level_name(detect_cpu_level());
  EXPECT_EQ(j["kernels"], nlohmann::json({"scalar", best}));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j["results"][i]["kernels"], i % 2 ? best : "scalar") << i;
    EXPECT_EQ(j["results"][i]["prompt_tokens"], i < 2 ? 8 : 16) << i;
    EXPECT_GT(j["results"][i]["prompt_tokens_per_s"].get<double>(), 0.0) << i;
  }
  CmdResult bad = run("bench prefill -m " + kStories + " --kernels sse9");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("unknown kernels 'sse9'"), std::string::npos) << bad.out;
  if (detect_cpu_level() < CpuLevel::Avx512) {
    CmdResult no = run("bench prefill -m " + kStories + " --kernels avx512");
    EXPECT_EQ(no.status, 1) << no.out;
    EXPECT_NE(no.out.find("cannot run avx512"), std::string::npos) << no.out;
  }
}

// `bench prefill --kv-type f16,q8_0` runs both KV types side by side, a row each and
// q8_0's median ratios to f16's per length;
// `generate --kv-type q4_0` generates (the greedy text of a trained model is close
// to F16's); `bench kv-quality` reports q8_0 and q4_0 against F16.
TEST(Cli, KvTypes) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 16,40 --decode 2 --kv-type f16,q8_0 --json " + dir +
                    "/kv.json");
  ASSERT_EQ(r.status, 0) << r.out;
  // each length: q8_0's medians set against f16's
  EXPECT_NE(r.out.find("     16  medians of 1: decode "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("     40  medians of 1: decode "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tok/s: q8_0 / f16 = "), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/kv.json");
  ASSERT_EQ(j["results"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j["results"][i]["kv_type"], i % 2 ? "q8_0" : "f16") << i;
    EXPECT_GT(j["results"][i]["decode_tokens_per_s"].get<double>(), 0.0) << i;
  }
  CmdResult g = run("generate -m " + kStories + " -p \"Once upon a time\" -n 16 --kv-type q4_0");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("there was"), std::string::npos) << g.out;  // (F16 gives ", there was a little girl named Lily")
  CmdResult q = run("bench kv-quality -m " + kStories + " --prompts 6 --pool 4 --max-tokens 64 --json " + dir +
                    "/q.json");
  ASSERT_EQ(q.status, 0) << q.out;
  const nlohmann::json qj = read_json(dir + "/q.json");
  ASSERT_EQ(qj["models"][0]["results"].size(), 2u);
  const nlohmann::json& q8 = qj["models"][0]["results"][0];
  EXPECT_EQ(q8["kv_type"], "q8_0");
  EXPECT_EQ(q8["prompts"], 6);
  EXPECT_GT(q8["top1_agreement"].get<double>(), 0.9);
  EXPECT_LT(q8["mean_kl"].get<double>(), 0.05);
  EXPECT_LT(q8["bytes_per_token"].get<int64_t>(), q8["f16_bytes_per_token"].get<int64_t>());
  CmdResult bad = run("bench kv-quality -m " + kStories + " --kv-type f16");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("--kv-type"), std::string::npos) << bad.out;
}

// PROMPTCACHE_KERNELS caps the CPU code path a process uses (an escape hatch
// should a path misbehave on some machine); an unknown value is reported and
// ignored.
TEST(Cli, KernelsEnvironmentVariableCapsThePath) {
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 8 --decode 1", "PROMPTCACHE_KERNELS=scalar");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("kernels scalar"), std::string::npos) << r.out;
  CmdResult bad = run("bench prefill -m " + kStories + " --tokens 8 --decode 1", "PROMPTCACHE_KERNELS=mmx");
  ASSERT_EQ(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("ignoring PROMPTCACHE_KERNELS=mmx"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("kernels " + cpu_level_name(detect_cpu_level())), std::string::npos) << bad.out;
}

// `bench tiers` end to end on a tiny generated model: every TTFT row is there and the
// disk row reused the module (restored from the tier, not encoded).
TEST(Cli, BenchTiersRunsEveryRow) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench tiers --shape tiny --length 64 --no-throughput --dir " + dir + " --json " + dir +
                    "/t.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(has_terminal_controls(r.out)) << r.out;
  EXPECT_NE(r.out.find("full recomputation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("module in memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(no --redis URL: Redis rows skipped)"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/t.json");
  ASSERT_EQ(j["ttft"].size(), 3u);
  EXPECT_EQ(j["ttft"][2]["where"], "module on disk");
  EXPECT_GE(j["ttft"][2]["tokens_reused"].get<int>(), 64);
}

// `bench quality` on a few prompts: budget 1 is the full recomputation (agreement 1,
// KL 0, identical continuations) for every policy, budget 0 reuses tokens; a bad
// policy name fails before the model loads.
TEST(Cli, BenchQualityBudgetOneIsExact) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench quality -m " + kStories + " --prompts 3 --pool 12 --budgets 0,1 --continuation 4 --json " +
                    dir + "/q.json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(has_terminal_controls(r.out)) << r.out;
  const nlohmann::json j = read_json(dir + "/q.json");
  ASSERT_EQ(j["models"].size(), 1u);
  int exact_rows = 0;
  for (const auto& row : j["models"][0]["results"]) {
    EXPECT_EQ(row["prompts"].get<int>(), row["change"] == "all" ? 15 : 3) << row.dump();
    if (row["budget"].get<double>() == 1.0) {
      ++exact_rows;
      EXPECT_EQ(row["top1_agreement"].get<double>(), 1.0) << row.dump();
      EXPECT_EQ(row["mean_kl"].get<double>(), 0.0) << row.dump();
      EXPECT_EQ(row["same_continuation"].get<double>(), 1.0) << row.dump();
    } else if (row["change"] != "all") {
      EXPECT_GT(row["mean_reused_tokens"].get<double>(), 0.0) << row.dump();
      // the moved paragraph and those after it are found chunk by chunk, not only the tail
      if (row["change"] == "paragraph") { EXPECT_GT(row["mean_reused_tokens"].get<double>(), 64.0) << row.dump(); }
    }
  }
  EXPECT_EQ(exact_rows, 6 * 3);  // (5 changes + all) x 3 policies
  CmdResult bad = run("bench quality -m " + kStories + " --policies cacheblend");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("cacheblend"), std::string::npos) << bad.out;
}

// `generate -p ""` runs BOS alone, as llama.cpp does; with no BOS there is nothing to
// run, and the message says so.
TEST(Cli, GenerateEmptyPromptIsBosAlone) {
  CmdResult r = run("generate -m " + kStories + " -p '' -n 4 --threads 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("timings: prompt 1 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated 4 tokens"), std::string::npos) << r.out;
  CmdResult n = run("generate -m " + kStories + " -p '' --no-bos");
  EXPECT_EQ(n.status, 1) << n.out;
  EXPECT_NE(n.out.find("the prompt is empty and --no-bos leaves no BOS token"), std::string::npos) << n.out;
  CmdResult none = run("generate -m " + kStories);
  EXPECT_EQ(none.status, 1) << none.out;
  EXPECT_NE(none.out.find("give either -p TEXT"), std::string::npos) << none.out;
}

// A request line with a field `generate -f` does not know (a typo would otherwise be
// ignored) or a setting out of range is an error naming the line.
TEST(Cli, GenerateFileRejectsUnknownFields) {
  const std::string f = test::temp_dir() + "/typo.jsonl";
  std::ofstream(f) << "{\"prompt\": \"Once\", \"max_tokens\": 2}\n"
                      "{\"prompt\": \"Once\", \"max_token\": 2}\n";
  CmdResult r = run("generate -m " + kStories + " -f " + f);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("typo.jsonl:2: unknown field \"max_token\" (a request takes: prompt, max_tokens,"),
            std::string::npos)
      << r.out;
  const std::string g = test::temp_dir() + "/range.jsonl";
  std::ofstream(g) << "{\"prompt\": \"Once\", \"temperature\": 1, \"top_p\": 0}\n";
  CmdResult t = run("generate -m " + kStories + " -f " + g);
  EXPECT_EQ(t.status, 1) << t.out;
  EXPECT_NE(t.out.find("range.jsonl:1: top_p must be in (0, 1]"), std::string::npos) << t.out;
}

// llama.cpp's flags: -c caps prompt + reply, checked against the model; -ngl is a
// message about GPUs; an unknown flag names the flags it is close to.
TEST(Cli, LlamaCppFlags) {
  CmdResult c = run("generate -m " + kStories + " -p 'Once upon a time' -n 20 -c 8 --threads 1");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("generated 3 tokens"), std::string::npos) << c.out;  // 5 prompt tokens + 3 = 8
  CmdResult big = run("generate -m " + kStories + " -p hi -c 99999999");
  EXPECT_EQ(big.status, 1) << big.out;
  EXPECT_NE(big.out.find("--ctx-size 99999999 is beyond the model's context of"), std::string::npos) << big.out;
  CmdResult sbig = run("serve -m " + kStories + " --port 0 --ctx-size 99999999");
  EXPECT_EQ(sbig.status, 1) << sbig.out;
  EXPECT_NE(sbig.out.find("(llama.context_length)"), std::string::npos) << sbig.out;
  for (const char* gpu : {"-ngl 99", "--n-gpu-layers 99", "-ngl=99"}) {
    CmdResult g = run("serve -m " + kStories + " " + gpu);
    EXPECT_EQ(g.status, 1) << gpu << ": " << g.out;
    EXPECT_NE(g.out.find("has no GPU support yet"), std::string::npos) << gpu << ": " << g.out;
  }
  CmdResult t = run("generate -m " + kStories + " -p hi --temperature 0.5");
  EXPECT_NE(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("--temperature: did you mean --temp?"), std::string::npos) << t.out;
  CmdResult k = run("serve -m " + kStories + " --ctx 512 --paralel 2");
  EXPECT_NE(k.status, 0) << k.out;
  EXPECT_NE(k.out.find("--ctx: did you mean --ctx-size?"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("--paralel: did you mean --parallel?"), std::string::npos) << k.out;
  CmdResult far = run("serve -m " + kStories + " --zzzz");
  EXPECT_NE(far.status, 0) << far.out;
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
}

// `pml check` on a schema nested 7,000 deep: a message with the place, not a crash.
TEST(Cli, PmlCheckDeepNestingIsAnError) {
  const std::string f = test::temp_dir() + "/deep.pml";
  std::string s = "<schema name=\"s\">";
  for (int i = 0; i < 7000; ++i) s += "<module name=\"m" + std::to_string(i) + "\">";
  for (int i = 0; i < 7000; ++i) s += "</module>";
  std::ofstream(f) << s << "</schema>";
  CmdResult r = run("pml check -m " + kStories + " " + f);
  EXPECT_EQ(r.status, 1) << r.out.substr(0, 500);
  EXPECT_NE(r.out.find("deep.pml: line 1, column"), std::string::npos) << r.out.substr(0, 500);
  EXPECT_NE(r.out.find("elements nest more than 64 levels deep"), std::string::npos) << r.out.substr(0, 500);
}

// `bench prefill --temperature 0,1` measures greedy and sampled decode side by side.
TEST(Cli, BenchPrefillTemperatures) {
  const std::string dir = test::temp_dir();
  CmdResult r = run("bench prefill -m " + kStories + " --tokens 8 --decode 4 --temperature 0,1 --seed 3 --json " +
                    dir + "/t.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = read_json(dir + "/t.json");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["temperature"], 0.0);
  EXPECT_EQ(j["results"][1]["temperature"], 1.0);
  EXPECT_EQ(j["seed"], 3);
  for (const auto& row : j["results"]) EXPECT_GT(row["decode_tokens_per_s"].get<double>(), 0.0) << row.dump();
}

// A "micro" llama (1 block, n_embd 32, 2 heads, 1 KV head, ff 64) with the u32 value of
// metadata key `key` replaced by `value`.
std::string patched_model(const std::string& key, uint32_t value) {
  MakeModelOptions o;
  o.shape = "micro";
  o.vocab_path = test::shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
  const std::string path = test::temp_dir() + "/" + key + ".gguf";
  make_random_model(o, path);
  std::string bytes = test::read_file(path);
  // A key is its u64 length and its bytes, then its u32 type (4: UINT32) and value.
  std::string k(8, '\0');
  const uint64_t len = key.size();
  std::memcpy(k.data(), &len, 8);
  k += key;
  const size_t at = bytes.find(k);
  if (at == std::string::npos) throw std::runtime_error("no key " + key);
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + at + k.size(), 4);
  if (type != 4) throw std::runtime_error(key + " is not a u32");
  std::memcpy(bytes.data() + at + k.size() + 4, &value, 4);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Hyperparameters that disagree with the file's tensors are an error naming the key,
// before anything is sized by them (a billion blocks ended in std::bad_alloc).
TEST(Cli, AbsurdHyperparametersNameTheKey) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* message;
  };
  const Case cases[] = {
      {"llama.block_count", 1000000000,
       "metadata key 'llama.block_count' is 1000000000, but the file has tensors for 1 blocks (blk.0 to blk.0)"},
      {"llama.context_length", 3000000000u, "metadata key 'llama.context_length' is 3000000000, beyond 2147483647"},
      {"llama.feed_forward_length", 1u << 30,
       "'llama.feed_forward_length' is 1073741824, but blk.0.ffn_up.weight has 64 outputs"},
      {"llama.embedding_length", 64, "'llama.embedding_length' is 64, but token_embd.weight has rows of 32 values"},
  };
  for (const Case& c : cases) {
    CmdResult r = run("generate -m " + patched_model(c.key, c.value) + " -p hi -n 1");
    EXPECT_EQ(r.status, 1) << c.key << ": " << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.key << ": " << r.out;
  }
}

// Progress lines are for terminals only: piped, make-model and the benches write no
// carriage return or escape sequence (the tests above check prefill, tiers and
// quality); on a terminal (a pseudo-terminal from script(1), util-linux) make-model
// redraws one line in place and erases it when done.
TEST(Cli, ProgressLineOnlyOnATerminal) {
  const std::string dir = test::temp_dir();
  const std::string model = dir + "/m.gguf";
  CmdResult m = run("make-model --shape tiny -o " + model);
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_FALSE(has_terminal_controls(m.out)) << m.out;
  const std::string benches[] = {
      "bench conversation -m " + model +
          " --sessions 2 --turns 2 --system-tokens 24 --user-min 4 --user-max 8 --reply-min 2 --reply-max 4",
      "bench modules -m " + model + " --lengths 24 --docs 2 --prompts 1",
      "bench serve -m " + kStories + " --chat-template-file " + test::shared_dir() +
          "/templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja --clients 1 --seconds 0.3 --system-words 10 --max-tokens 1"
          " --parallel 1 --kv-memory 16MiB",
  };
  for (const std::string& b : benches) {
    CmdResult r = run(b);
    ASSERT_EQ(r.status, 0) << b << "\n" << r.out;
    EXPECT_FALSE(has_terminal_controls(r.out)) << b << "\n" << r.out;
  }
  CmdResult t = run_shell("script -qec '" + test::cli_path() + " make-model --shape tiny -o " + dir +
                          "/t.gguf' /dev/null < /dev/null");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("\rmake-model: 4/4 (100%)"), std::string::npos) << t.out;  // 2 blocks + 2 steps
  EXPECT_NE(t.out.find("\r\x1b[K"), std::string::npos) << t.out;                 // erased at the end
  EXPECT_NE(t.out.find("done in"), std::string::npos) << t.out;
}

}  // namespace
}  // namespace pc
