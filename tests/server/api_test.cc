// Routes, streaming, sampling parameters and errors of `promptcache serve`
// against a real server process (stories260K, ChatML template).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>

#include "server_fixture.h"

namespace pc::test {
namespace {

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                             shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"),
                             "--parallel", "4", "--kv-memory", "64MiB"});
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static ServeProcess* srv_;
  httplib::Client c = srv_->client();
};
ServeProcess* Api::srv_ = nullptr;

json completion(const std::string& prompt, int max_tokens) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST_F(Api, HealthModelsMetrics) {
  Reply h = get(c, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  Reply m = get(c, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.body["object"], "list");
  EXPECT_EQ(m.body["data"][0]["id"], "stories260K");
  EXPECT_EQ(get(c, "/v1/models/stories260K").status, 200);
  EXPECT_EQ(get(c, "/v1/models/gpt-4").status, 404);
  post(c, "/v1/completions", completion("Once", 4));
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("promptcache_requests_total"), std::string::npos);
  EXPECT_NE(r->body.find("promptcache_tokens_total{kind=\"prompt\"}"), std::string::npos);
  EXPECT_NE(r->body.find("promptcache_time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_NE(r->body.find("promptcache_inter_token_latency_seconds_bucket"), std::string::npos);
  EXPECT_NE(r->body.find("promptcache_sequences{state=\"queued\"}"), std::string::npos);
  EXPECT_NE(r->body.find("promptcache_kv_bytes"), std::string::npos);
}

TEST_F(Api, CompletionGreedyKnownTextSameColdAndWarm) {
  json req = completion("Once upon a time", 24);
  Reply cold = post(c, "/v1/completions", req);
  ASSERT_EQ(cold.status, 200) << cold.raw;
  EXPECT_EQ(cold.body["object"], "text_completion");
  const std::string text = cold.body["choices"][0]["text"];
  EXPECT_EQ(text.rfind(", there was a little girl named Lily", 0), 0u) << text;
  EXPECT_EQ(cold.body["choices"][0]["finish_reason"], "length");
  const json& u = cold.body["usage"];
  EXPECT_EQ(u["completion_tokens"], 24);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + 24);
  ASSERT_TRUE(u["prompt_tokens_details"]["cached_tokens"].is_number());

  Reply warm = post(c, "/v1/completions", req);
  ASSERT_EQ(warm.status, 200);
  EXPECT_EQ(warm.body["choices"][0]["text"], text);  // a hit never changes the answer
  EXPECT_EQ(warm.body["usage"]["prompt_tokens_details"]["cached_tokens"],
            u["prompt_tokens"].get<int>() - 1);
}

TEST_F(Api, CompletionStreamMatchesWhole) {
  json req = completion("The little dog", 20);
  Reply whole = post(c, "/v1/completions", req);
  ASSERT_EQ(whole.status, 200);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text, finish;
  json usage;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    json j = json::parse(ev[i]);
    EXPECT_EQ(j["object"], "text_completion");
    if (j.contains("usage")) {
      usage = j["usage"];
      EXPECT_TRUE(j["choices"].empty());
      continue;
    }
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole.body["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  ASSERT_TRUE(usage.is_object());
  EXPECT_EQ(usage["completion_tokens"], 20);
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(Api, ChatWholeAndStreamed) {
  json req = {{"model", "stories260K"},
              {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
              {"max_tokens", 16},
              {"temperature", 0}};
  Reply whole = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["object"], "chat.completion");
  EXPECT_EQ(whole.body["choices"][0]["message"]["role"], "assistant");
  const std::string content = whole.body["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  EXPECT_TRUE(whole.body["usage"]["prompt_tokens_details"]["cached_tokens"].is_number());
  EXPECT_TRUE(whole.body["promptcache"].is_object());

  req["stream"] = true;
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  json first = json::parse(ev[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  int finishes = 0;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    json j = json::parse(ev[i]);
    EXPECT_FALSE(j.contains("usage"));  // include_usage not asked
    const json& d = j["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(text, content);
  EXPECT_EQ(finishes, 1);
}

TEST_F(Api, StopStringsAcrossTokensAreNotEmitted) {
  json req = completion("Once upon a time", 40);
  const std::string full = post(c, "/v1/completions", req).body["choices"][0]["text"];
  const size_t at = full.find("Lily");
  ASSERT_NE(at, std::string::npos) << full;
  req["stop"] = json::array({"nothing-like-this", "ily"});
  Reply r = post(c, "/v1/completions", req);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["choices"][0]["text"], full.substr(0, at + 1));
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  req["stream"] = true;
  auto s = c.Post("/v1/completions", req.dump(), "application/json");
  std::string text;
  for (auto& e : sse_events(s->body))
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, full.substr(0, at + 1));
}

TEST_F(Api, SamplingIsSeeded) {
  json req = completion("Once upon a time", 24);
  req["temperature"] = 1.0;
  req["top_p"] = 0.9;
  req["top_k"] = 40;
  req["min_p"] = 0.01;
  req["repetition_penalty"] = 1.1;
  req["seed"] = 42;
  Reply a = post(c, "/v1/completions", req);
  Reply b = post(c, "/v1/completions", req);
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
  req["max_completion_tokens"] = 3;
  EXPECT_EQ(post(c, "/v1/completions", req).body["usage"]["completion_tokens"], 3);
}

void expect_error(const Reply& r, int status, const std::string& param) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  const json& e = r.body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("code"));
  if (param.empty()) EXPECT_TRUE(e["param"].is_null()) << r.raw;
  else EXPECT_EQ(e["param"], param) << r.raw;
}

TEST_F(Api, Errors) {
  auto raw = c.Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  EXPECT_EQ(json::parse(raw->body)["error"]["code"], "invalid_json");

  json req = completion("Hi", 4);
  req["temperature"] = "hot";
  expect_error(post(c, "/v1/completions", req), 400, "temperature");
  req["temperature"] = 7;
  expect_error(post(c, "/v1/completions", req), 400, "temperature");
  expect_error(post(c, "/v1/completions", {{"max_tokens", 3}}), 400, "prompt");
  expect_error(post(c, "/v1/chat/completions", {{"model", "stories260K"}}), 400, "messages");
  expect_error(post(c, "/v1/chat/completions", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}),
               400, "messages[0].role");
  expect_error(post(c, "/v1/completions", {{"prompt", "Hi"}, {"n", 2}}), 400, "n");
  expect_error(post(c, "/v1/completions", {{"prompt", "Hi"}, {"stop", 5}}), 400, "stop");

  Reply m = post(c, "/v1/completions", {{"model", "gpt-4"}, {"prompt", "Hi"}});
  expect_error(m, 404, "model");
  EXPECT_EQ(m.body["error"]["code"], "model_not_found");

  std::string long_prompt;
  for (int i = 0; i < 1200; ++i) long_prompt += "Lily and Tom ";
  Reply l = post(c, "/v1/completions", completion(long_prompt, 4));
  expect_error(l, 400, "prompt");
  EXPECT_EQ(l.body["error"]["code"], "context_length_exceeded");
  Reply mt = post(c, "/v1/completions", completion("Hi", 5000));  // stops at the context's end
  ASSERT_EQ(mt.status, 200) << mt.raw;
  EXPECT_GT(mt.body["promptcache"]["max_tokens_capped"].get<int64_t>(), 0) << mt.raw;
  EXPECT_LT(mt.body["promptcache"]["max_tokens_capped"].get<int64_t>(), 5000) << mt.raw;

  Reply nf = get(c, "/v1/nothing");
  expect_error(nf, 404, "");
  EXPECT_EQ(nf.body["error"]["code"], "unknown_route");
  expect_error(post(c, "/v1/pml/completions", json::object()), 400, "prompt");
  expect_error(post(c, "/v1/completions", {{"prompt", "Hi"}, {"logprobs", 21}}), 400, "logprobs");
  expect_error(post(c, "/v1/chat/completions",
                    {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}}),
               400, "top_logprobs");
}

// ---- logprobs ------------------------------------------------------------------

// Checks one position's numbers: the token's logprob is a log-probability, the
// top list is sorted, a proper part of a distribution, and (greedy) starts with
// the sampled token.
void expect_position(double lp, const std::vector<double>& top, bool greedy, size_t n) {
  EXPECT_LE(lp, 0.0);
  ASSERT_EQ(top.size(), n);
  double mass = 0;
  for (size_t k = 0; k < top.size(); ++k) {
    EXPECT_LE(top[k], 0.0);
    if (k > 0) {
      EXPECT_LE(top[k], top[k - 1]);
    }
    mass += std::exp(top[k]);
  }
  EXPECT_LE(mass, 1.0 + 1e-5);
  if (greedy) {
    EXPECT_DOUBLE_EQ(lp, top[0]);
  } else {
    EXPECT_LE(lp, top[0]);
  }
}

struct ChatLogprobs {
  std::vector<std::string> tokens;
  std::vector<double> lps;
  std::vector<std::vector<double>> tops;
};

ChatLogprobs chat_content(const json& content, bool greedy, size_t n) {
  ChatLogprobs out;
  for (const json& e : content) {
    out.tokens.push_back(e["token"]);
    out.lps.push_back(e["logprob"]);
    std::vector<double> top;
    for (const json& t : e["top_logprobs"]) top.push_back(t["logprob"]);
    expect_position(out.lps.back(), top, greedy, n);
    // bytes spell the token
    std::string bytes;
    for (const json& b : e["bytes"]) bytes += char(b.get<int>());
    EXPECT_EQ(bytes, out.tokens.back());
    out.tops.push_back(top);
  }
  return out;
}

TEST_F(Api, ChatLogprobsWholeAndStreamedAgree) {
  json req = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
              {"max_tokens", 12}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}};
  Reply whole = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& choice = whole.body["choices"][0];
  const ChatLogprobs a = chat_content(choice["logprobs"]["content"], true, 3);
  ASSERT_FALSE(a.tokens.empty());
  std::string joined;
  for (const std::string& t : a.tokens) joined += t;
  EXPECT_EQ(joined, choice["message"]["content"].get<std::string>());
  EXPECT_LE(a.tokens.size(), size_t(whole.body["usage"]["completion_tokens"].get<int>()));

  req["stream"] = true;
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  json content = json::array();
  for (const std::string& e : sse_events(r->body)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    const json& lp = j["choices"][0]["logprobs"];
    if (lp.is_object())
      for (const json& x : lp["content"]) content.push_back(x);
  }
  const ChatLogprobs b = chat_content(content, true, 3);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(b.lps, a.lps);  // the same logits, bit for bit
  EXPECT_EQ(b.tops, a.tops);

  // logprobs without alternatives; and none at all unless asked.
  req.erase("stream");
  req["top_logprobs"] = 0;
  Reply bare = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(bare.status, 200);
  EXPECT_TRUE(bare.body["choices"][0]["logprobs"]["content"][0]["top_logprobs"].empty());
  req.erase("logprobs");
  req.erase("top_logprobs");
  EXPECT_TRUE(post(c, "/v1/chat/completions", req).body["choices"][0]["logprobs"].is_null());
}

TEST_F(Api, CompletionLogprobsLegacyFormat) {
  json req = completion("Once upon a time", 10);
  req["logprobs"] = 5;
  Reply whole = post(c, "/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const std::string text = whole.body["choices"][0]["text"];
  const json& lp = whole.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 10u) << lp.dump();
  std::string joined;
  for (size_t i = 0; i < 10; ++i) {
    const std::string tok = lp["tokens"][i];
    EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.size());
    joined += tok;
    std::vector<double> top;
    for (auto& [piece, v] : lp["top_logprobs"][i].items()) top.push_back(v);
    std::sort(top.rbegin(), top.rend());
    ASSERT_FALSE(top.empty());
    // Distinct tokens may share a piece (one key), so up to 5.
    EXPECT_LE(top.size(), 5u);
    const double l = lp["token_logprobs"][i];
    EXPECT_LE(l, 0.0);
    EXPECT_DOUBLE_EQ(l, top[0]);
    EXPECT_DOUBLE_EQ(lp["top_logprobs"][i][tok].get<double>(), l);
  }
  EXPECT_EQ(joined, text);

  // Sampled: the token's logprob is that of the model, not of the sampling settings.
  req["temperature"] = 1.5;
  req["top_k"] = 3;
  req["seed"] = 7;
  Reply sampled = post(c, "/v1/completions", req);
  ASSERT_EQ(sampled.status, 200);
  const json& sl = sampled.body["choices"][0]["logprobs"];
  for (size_t i = 0; i < sl["tokens"].size(); ++i) {
    double best = -1e30;
    for (auto& [piece, v] : sl["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_LE(sl["token_logprobs"][i].get<double>(), best);
  }

  // Streamed: the chunks' arrays add up to the whole response's.
  req = completion("Once upon a time", 10);
  req["logprobs"] = 5;
  req["stream"] = true;
  auto r = c.Post("/v1/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  json tokens = json::array(), lps = json::array(), offsets = json::array();
  for (const std::string& e : sse_events(r->body)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    const json& x = j["choices"][0]["logprobs"];
    if (!x.is_object()) continue;
    for (const json& t : x["tokens"]) tokens.push_back(t);
    for (const json& t : x["token_logprobs"]) lps.push_back(t);
    for (const json& t : x["text_offset"]) offsets.push_back(t);
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(lps, lp["token_logprobs"]);
  EXPECT_EQ(offsets, lp["text_offset"]);
}

}  // namespace
}  // namespace pc::test

namespace pc::test {
namespace {

// prompt_tokens = cached + approximate + recomputed + fresh, cold and warm, for
// completions and chat; computed_tokens counts what the forward pass computed.
TEST_F(Api, UsageAddsUp) {
  auto check = [](const Reply& r) -> int64_t {
    EXPECT_EQ(r.status, 200) << r.raw;
    if (r.status != 200) return -1;
    const json& p = r.body["promptcache"];
    const int64_t prompt = r.body["usage"]["prompt_tokens"];
    EXPECT_EQ(prompt, p["cached_tokens"].get<int64_t>() + p["approximate_tokens"].get<int64_t>() +
                          p["recomputed_tokens"].get<int64_t>() + p["fresh_tokens"].get<int64_t>())
        << r.raw;
    EXPECT_EQ(p["approximate_tokens"], 0);
    EXPECT_EQ(p["computed_tokens"], p["fresh_tokens"]);
    EXPECT_EQ(r.body["usage"]["prompt_tokens_details"]["cached_tokens"], p["cached_tokens"]);
    return p["cached_tokens"].get<int64_t>();
  };
  const json req = completion("The usage of a prompt adds up", 4);
  const int64_t cold = check(post(c, "/v1/completions", req));
  EXPECT_GT(check(post(c, "/v1/completions", req)), cold);
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Count the tokens, please."}}}},
                     {"max_tokens", 4}, {"temperature", 0}};
  check(post(c, "/v1/chat/completions", chat));
  EXPECT_GT(check(post(c, "/v1/chat/completions", chat)), 0);
}

}  // namespace
}  // namespace pc::test
