// Agent-client compatibility of `promptcache serve` against a real server process
// (stories260K): fields answered 400 unsupported_parameter or accepted as no-ops,
// llama-server's /tokenize, /detokenize, /apply-template and /props, CORS, 405 for a
// wrong method, --chat-template chatml, --any-model, and API keys on the new routes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

const std::string kModel = "models/stories260K.gguf";

std::vector<std::string> qwen_args() {
  return {"-m", shared_path(kModel), "--chat-template-file",
          shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--parallel", "2", "--kv-memory",
          "64MiB"};
}

json chat_body() {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}}, {"max_tokens", 6},
          {"temperature", 0}};
}

json completion_body() { return {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}}; }

const json kTools = {{{"type", "function"},
                      {"function",
                       {{"name", "get_weather"},
                        {"description", "Weather of a city"},
                        {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}};

class Compat : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> args = qwen_args();
    args.insert(args.end(), {"--cors-origin", "*"});
    srv_ = new ServeProcess(args);
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static ServeProcess* srv_;
  httplib::Client c = srv_->client();
};
ServeProcess* Compat::srv_ = nullptr;

// ── A. Fields the server cannot honour: 400 naming the field ────────────────────────

struct Unsupported {
  const char* name;  // test name
  const char* field;
  json value;
};
void PrintTo(const Unsupported& u, std::ostream* os) { *os << u.field << " = " << u.value.dump(); }

class CompatUnsupported : public Compat, public ::testing::WithParamInterface<std::tuple<Unsupported, bool>> {};

TEST_P(CompatUnsupported, Is400NamingTheField) {
  const auto& [u, chat] = GetParam();
  json body = chat ? chat_body() : completion_body();
  body[u.field] = u.value;
  Reply r = post(c, chat ? "/v1/chat/completions" : "/v1/completions", body);
  ASSERT_EQ(r.status, 400) << r.raw;
  const json& e = r.body["error"];
  EXPECT_EQ(e["type"], "invalid_request_error") << r.raw;
  EXPECT_EQ(e["param"], u.field) << r.raw;
  EXPECT_EQ(e["code"], "unsupported_parameter") << r.raw;
  EXPECT_NE(e["message"].get<std::string>().find(u.field), std::string::npos) << r.raw;
}

const Unsupported kUnsupported[] = {
    // response_format json_object / json_schema: enforced (tests/server/structured_output_test.cc).
    {"LogitBias", "logit_bias", {{"50", 10}}},
    {"Suffix", "suffix", "and they lived happily."},
    {"BestOf", "best_of", 2},
    {"N", "n", 2},
    {"Echo", "echo", true},
    {"FrequencyPenalty", "frequency_penalty", 0.5},
    {"PresencePenalty", "presence_penalty", -0.5},
    // tool_choice "required" / named: enforced on chat with a tool-call template, 400
    // where it cannot be (tests/server/tools_test.cc).
};

INSTANTIATE_TEST_SUITE_P(CompatFields, CompatUnsupported,
                         ::testing::Combine(::testing::ValuesIn(kUnsupported), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_chat" : "_completions");
                         });

// Accepted fields with no effect, values of the 400 fields that ask for nothing, and
// unknown fields: 200, and the same greedy text as without them.
TEST_F(Compat, NoOpFieldsAreAcceptedAndChangeNothing) {
  const json noops = {{"store", true},
                      {"metadata", {{"session", "abc"}}},
                      {"service_tier", "auto"},
                      {"parallel_tool_calls", false},
                      {"user", "user-42"},
                      {"prompt_cache_key", "conversation-7"},
                      {"response_format", {{"type", "text"}}},
                      {"logit_bias", json::object()},
                      {"n", 1},
                      {"best_of", 1},
                      {"echo", false},
                      {"suffix", ""},
                      {"frequency_penalty", 0},
                      {"presence_penalty", 0},
                      {"tool_choice", "auto"},
                      {"some_future_field", {{"x", 1}}}};
  for (bool chat : {false, true}) {
    const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
    json body = chat ? chat_body() : completion_body();
    Reply plain = post(c, path, body);
    ASSERT_EQ(plain.status, 200) << plain.raw;
    body.update(noops);
    Reply with = post(c, path, body);
    ASSERT_EQ(with.status, 200) << path << " " << with.raw;
    const json& a = plain.body["choices"][0];
    const json& b = with.body["choices"][0];
    EXPECT_EQ(chat ? a["message"]["content"] : a["text"], chat ? b["message"]["content"] : b["text"]);
  }
}

TEST_F(Compat, ToolChoiceNoneRendersNoTools) {
  json body = chat_body();
  body["tools"] = kTools;
  body["tool_choice"] = "auto";
  Reply with_tools = post(c, "/apply-template", body);
  ASSERT_EQ(with_tools.status, 200) << with_tools.raw;
  EXPECT_NE(with_tools.body["prompt"].get<std::string>().find("get_weather"), std::string::npos);
  body["tool_choice"] = "none";
  Reply none = post(c, "/apply-template", body);
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_EQ(none.body["prompt"].get<std::string>().find("get_weather"), std::string::npos);
  body.erase("tools");
  body.erase("tool_choice");
  EXPECT_EQ(post(c, "/apply-template", body).body["prompt"], none.body["prompt"]);
  // A chat request with tool_choice "none" is answered (its prompt has no tools).
  json chat = chat_body();
  chat["tools"] = kTools;
  chat["tool_choice"] = "none";
  Reply r = post(c, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.raw;
  Reply plain = post(c, "/v1/chat/completions", chat_body());
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], plain.body["usage"]["prompt_tokens"]);
}

// ── B. llama-server routes ───────────────────────────────────────────────────────────

TEST_F(Compat, TokenizeDetokenizeRoundTrip) {
  const std::string text = "Once upon a time, there was a little girl.";
  Reply t = post(c, "/tokenize", {{"content", text}});
  ASSERT_EQ(t.status, 200) << t.raw;
  ASSERT_TRUE(t.body["tokens"].is_array());
  ASSERT_FALSE(t.body["tokens"].empty());
  for (const json& id : t.body["tokens"]) EXPECT_TRUE(id.is_number_integer());
  Reply d = post(c, "/detokenize", {{"tokens", t.body["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["content"], text);

  // The prompt tokens of a completion are the tokens with BOS (add_special).
  Reply bos = post(c, "/tokenize", {{"content", text}, {"add_special", true}});
  ASSERT_EQ(bos.body["tokens"].size(), t.body["tokens"].size() + 1);
  EXPECT_EQ(json(std::vector<json>(bos.body["tokens"].begin() + 1, bos.body["tokens"].end())),
            t.body["tokens"]);
  json req = completion_body();
  req["prompt"] = text;
  Reply comp = post(c, "/v1/completions", req);
  EXPECT_EQ(comp.body["usage"]["prompt_tokens"], bos.body["tokens"].size());
  // Token ids as a completion prompt give the same answer as the text.
  req["prompt"] = bos.body["tokens"];
  EXPECT_EQ(post(c, "/v1/completions", req).body["choices"][0]["text"], comp.body["choices"][0]["text"]);
}

TEST_F(Compat, TokenizeWithPieces) {
  Reply t = post(c, "/tokenize", {{"content", "Once upon"}, {"with_pieces", true}});
  ASSERT_EQ(t.status, 200) << t.raw;
  std::string joined;
  for (const json& p : t.body["tokens"]) {
    ASSERT_TRUE(p["id"].is_number_integer()) << t.raw;
    ASSERT_TRUE(p["piece"].is_string()) << t.raw;
    joined += p["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, " Once upon");  // the SentencePiece space prefix is a piece's byte
  // A character outside the tiny vocabulary falls back to byte tokens: pieces that are
  // not valid UTF-8 on their own come as arrays of byte values.
  Reply b = post(c, "/tokenize", {{"content", "日"}, {"with_pieces", true}});
  ASSERT_EQ(b.status, 200) << b.raw;
  std::string bytes;
  int arrays = 0;
  for (const json& p : b.body["tokens"]) {
    if (p["piece"].is_array()) {
      ++arrays;
      for (const json& x : p["piece"]) bytes.push_back(char(x.get<int>()));
    } else {
      bytes += p["piece"].get<std::string>();
    }
  }
  EXPECT_GE(arrays, 1) << b.raw;
  EXPECT_EQ(bytes, " 日");
  std::vector<int> ids;
  for (const json& p : b.body["tokens"]) ids.push_back(p["id"]);
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", ids}}).body["content"], "日");
}

TEST_F(Compat, TokenizeErrors) {
  Reply m = post(c, "/tokenize", json::object());
  EXPECT_EQ(m.status, 400);
  EXPECT_EQ(m.body["error"]["param"], "content");
  EXPECT_EQ(post(c, "/tokenize", {{"content", 5}}).body["error"]["param"], "content");
  EXPECT_EQ(post(c, "/tokenize", {{"content", "x"}, {"with_pieces", "yes"}}).body["error"]["param"],
            "with_pieces");
  Reply d = post(c, "/detokenize", {{"tokens", {1, 2, 1000000}}});
  EXPECT_EQ(d.status, 400);
  EXPECT_EQ(d.body["error"]["param"], "tokens");
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", "abc"}}).status, 400);
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", json::array()}}).body["content"], "");
}

TEST_F(Compat, ApplyTemplateIsWhatChatRenders) {
  json body = chat_body();
  body["messages"] = {{{"role", "system"}, {"content", "You are terse."}},
                      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi "}},
                                                       {{"type", "text"}, {"text", "there"}}}}}};
  Reply a = post(c, "/apply-template", body);
  ASSERT_EQ(a.status, 200) << a.raw;
  const std::string prompt = a.body["prompt"];
  EXPECT_EQ(prompt,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi \nthere<|im_end|>\n"
            "<|im_start|>assistant\n");  // text parts joined with "\n"
  // The chat request's prompt is that text tokenized (special tokens parsed, BOS).
  Reply t = post(c, "/tokenize", {{"content", prompt}, {"add_special", true}});
  body["cache_salt"] = "apply-template";  // a fresh conversation: nothing spliced
  Reply chat = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(chat.body["usage"]["prompt_tokens"], t.body["tokens"].size());
  EXPECT_EQ(post(c, "/apply-template", {{"messages", "x"}}).body["error"]["param"], "messages");
}

TEST_F(Compat, Props) {
  Reply p = get(c, "/props");
  ASSERT_EQ(p.status, 200) << p.raw;
  const json& b = p.body;
  EXPECT_EQ(b["model_alias"], "stories260K");
  EXPECT_NE(b["model_path"].get<std::string>().find("stories260K.gguf"), std::string::npos);
  EXPECT_EQ(b["n_ctx"], get(c, "/v1/models").body["data"][0]["n_ctx_train"]);
  EXPECT_EQ(b["total_slots"], 2);
  EXPECT_EQ(b["chat_template_source"], "file");
  EXPECT_NE(b["chat_template"].get<std::string>().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(b["build_info"].get<std::string>().rfind("promptcache ", 0), 0u);
  EXPECT_EQ(b["default_generation_settings"]["n_ctx"], b["n_ctx"]);
  EXPECT_EQ(b["default_generation_settings"]["params"]["temperature"], 1.0);
  EXPECT_EQ(b["default_generation_settings"]["params"]["max_tokens"], 16);
  EXPECT_EQ(b["promptcache"]["cors_origin"], "*");
}

TEST_F(Compat, CorsHeadersAndPreflight) {
  auto h = c.Get("/health", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->get_header_value("Access-Control-Allow-Origin"), "*");
  auto err = c.Get("/v1/nothing");  // error answers carry it too
  ASSERT_TRUE(err);
  EXPECT_EQ(err->get_header_value("Access-Control-Allow-Origin"), "*");
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize",
                           "/props", "/v1/schemas/abc", "/v1/cache/stats"}) {
    auto r = c.Options(path, {{"Origin", "https://app.example"},
                              {"Access-Control-Request-Method", "POST"},
                              {"Access-Control-Request-Headers", "authorization, content-type"}});
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 204) << path;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*") << path;
    EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("OPTIONS"), std::string::npos) << path;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type") << path;
  }
  auto m = c.Options("/v1/chat/completions");
  EXPECT_NE(m->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  auto nf = c.Options("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
}

TEST_F(Compat, WrongMethodIs405) {
  Reply g = get(c, "/v1/chat/completions");
  EXPECT_EQ(g.status, 405) << g.raw;
  EXPECT_EQ(g.body["error"]["code"], "method_not_allowed");
  EXPECT_EQ(g.body["error"]["type"], "invalid_request_error");
  auto r = c.Get("/v1/completions");
  EXPECT_NE(r->get_header_value("Allow").find("POST"), std::string::npos);
  EXPECT_EQ(post(c, "/v1/models", json::object()).status, 405);
  EXPECT_EQ(post(c, "/props", json::object()).status, 405);
  EXPECT_EQ(get(c, "/tokenize").status, 405);
  auto d = c.Delete("/v1/cache/stats");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 405);
  auto pm = c.Post("/v1/models/stories260K", "{}", "application/json");
  EXPECT_EQ(pm->status, 405);
  // Methods a path does serve still work; unknown paths stay 404.
  EXPECT_EQ(get(c, "/v1/schemas/nope").status, 404);
  EXPECT_EQ(get(c, "/v1/schemas/nope").body["error"]["code"], "schema_not_found");
  EXPECT_EQ(get(c, "/v1/nothing").body["error"]["code"], "unknown_route");
  EXPECT_EQ(post(c, "/v1/nothing", json::object()).status, 404);
}

// ── Servers with other flags ─────────────────────────────────────────────────────────

TEST(CompatFlags, NoCorsHeadersByDefault) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB"});
  auto c = srv.client();
  auto h = c.Get("/health", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->has_header("Access-Control-Allow-Origin"));
  auto o = c.Options("/v1/chat/completions", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->status, 204);
  EXPECT_FALSE(o->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(o->has_header("Access-Control-Allow-Methods"));
  // A model without a template: chat and /apply-template are 400 no_chat_template.
  Reply a = post(c, "/apply-template", chat_body());
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["code"], "no_chat_template");
  EXPECT_TRUE(get(c, "/props").body["chat_template"].is_null());
}

TEST(CompatFlags, SpecificCorsOrigin) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--cors-origin",
                    "https://app.example"});
  auto c = srv.client();
  auto h = c.Get("/v1/models");
  EXPECT_EQ(h->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
}

TEST(CompatFlags, BuiltinChatMlTemplate) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--chat-template", "chatml"});
  auto c = srv.client();
  Reply a = post(c, "/apply-template", chat_body());
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["prompt"], "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n");
  Reply r = post(c, "/v1/chat/completions", chat_body());
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(get(c, "/props").body["chat_template_source"], "builtin:chatml");
}

TEST(CompatFlags, AnyModel) {
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--any-model"});
  auto c = srv.client();
  json body = completion_body();
  body["model"] = "gpt-4o";
  Reply r = post(c, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["model"], "stories260K");  // the model that answered
  EXPECT_EQ(get(c, "/v1/models/gpt-4o").status, 200);
  EXPECT_EQ(get(c, "/props").body["promptcache"]["any_model"], true);
}

TEST(CompatFlags, NewRoutesNeedAnApiKey) {
  const std::string keys = temp_dir() + "/compat_keys.txt";
  std::ofstream(keys) << "key-a alice\n";
  ServeProcess srv({"-m", shared_path(kModel), "--kv-memory", "32MiB", "--chat-template", "chatml",
                    "--api-keys", keys, "--cors-origin", "*"});
  auto anon = srv.client();
  auto a = srv.client("key-a");
  const std::pair<const char*, json> posts[] = {{"/tokenize", {{"content", "Once"}}},
                                                {"/detokenize", {{"tokens", {1, 2}}}},
                                                {"/apply-template", chat_body()}};
  for (const auto& [path, body] : posts) {
    Reply denied = post(anon, path, body);
    EXPECT_EQ(denied.status, 401) << path;
    EXPECT_EQ(denied.body["error"]["code"], "invalid_api_key") << path;
    EXPECT_EQ(post(a, path, body).status, 200) << path;
  }
  EXPECT_EQ(get(anon, "/props").status, 401);
  EXPECT_EQ(get(a, "/props").status, 200);
  EXPECT_EQ(get(a, "/props").body["promptcache"]["api_keys"], true);
  // A preflight carries no credentials: it is answered without a key.
  auto o = anon.Options("/v1/chat/completions", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->status, 204);
}

std::string run_cli(const std::string& args, int* status) {
  std::string out;
  FILE* p = popen((promptcache_path() + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

TEST(CompatFlags, HelpExplainsTheFlags) {
  int status = 0;
  const std::string help = run_cli("serve --help", &status);
  EXPECT_EQ(status, 0);
  for (const char* flag : {"--cors-origin", "--any-model", "--chat-template", "--alias", "/tokenize", "/props"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag << "\n" << help;
  EXPECT_NE(help.find("chatml"), std::string::npos) << help;
  const std::string bad = run_cli("serve -m " + shared_path(kModel) + " --chat-template nope", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(bad.find("chat-template"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pc::test
