// The PML API (/v1/schemas, /v1/pml/completions) against a real server process.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace pc::test {
namespace {

const char* kSchema = R"(<schema name="story">
  <system>You tell short stories.</system>
  <module name="lily">Lily had a red ball and a big dog named Max. They played in the park every
  day, and Max always brought the ball back to Lily.</module>
  <module name="tom">Tom liked to build tall towers with his blocks.</module>
</schema>)";

const char* kPrompt = R"(<prompt schema="story"><lily/><user>What happened next?</user><assistant/></prompt>)";

class Pml : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    srv_ = new ServeProcess({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                             shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory",
                             "64MiB"});
  }
  static void TearDownTestSuite() {
    delete srv_;
    srv_ = nullptr;
  }
  static ServeProcess* srv_;
  httplib::Client c = srv_->client();

  Reply put(const std::string& name, const std::string& text, const std::string& query = "") {
    auto r = c.Put(("/v1/schemas/" + name + query).c_str(), text, "application/xml");
    if (!r) throw std::runtime_error("PUT failed");
    Reply out;
    out.status = r->status;
    out.raw = r->body;
    out.body = json::parse(r->body, nullptr, false);
    return out;
  }
  Reply del(const std::string& name) {
    auto r = c.Delete(("/v1/schemas/" + name).c_str());
    Reply out;
    out.status = r->status;
    out.raw = r->body;
    out.body = json::parse(r->body, nullptr, false);
    return out;
  }
};
ServeProcess* Pml::srv_ = nullptr;

json pml_request(const std::string& prompt) {
  return {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
}

TEST_F(Pml, PutGetListDelete) {
  Reply p = put("story", kSchema);
  ASSERT_EQ(p.status, 201) << p.raw;
  EXPECT_EQ(p.body["name"], "story");
  EXPECT_EQ(p.body["modules"], 2);
  // The layout: the root, then the modules in document order at increasing positions.
  const json& mods = p.body["layout"]["modules"];
  ASSERT_EQ(mods.size(), 3u) << p.raw;
  EXPECT_TRUE(mods[0]["root"].get<bool>());
  EXPECT_EQ(mods[1]["path"], "lily");
  EXPECT_EQ(mods[2]["path"], "tom");
  EXPECT_GT(mods[1]["tokens"].get<int>(), 20);
  EXPECT_EQ(mods[2]["start"].get<int>(), mods[1]["start"].get<int>() + mods[1]["length"].get<int>());
  EXPECT_EQ(put("story", kSchema).status, 200);  // replaced

  Reply g = get(c, "/v1/schemas/story");
  ASSERT_EQ(g.status, 200) << g.raw;
  EXPECT_EQ(g.body["source"], kSchema);
  EXPECT_EQ(g.body["layout"], p.body["layout"]);
  EXPECT_EQ(g.body["layout"]["positions"], p.body["positions"]);

  ASSERT_EQ(put("other", R"(<schema name="other">Hello <module name="m">world</module></schema>)").status, 201);
  Reply l = get(c, "/v1/schemas");
  ASSERT_EQ(l.status, 200);
  ASSERT_EQ(l.body["data"].size(), 2u) << l.raw;
  EXPECT_EQ(l.body["data"][0]["name"], "other");
  EXPECT_EQ(l.body["data"][1]["name"], "story");
  // Schemas are per namespace.
  EXPECT_TRUE(get(c, "/v1/schemas?cache_salt=elsewhere").body["data"].empty());

  Reply d = del("other");
  EXPECT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(get(c, "/v1/schemas/other").status, 404);
  EXPECT_EQ(del("other").status, 404);
  EXPECT_EQ(get(c, "/v1/schemas").body["data"].size(), 1u);
}

TEST_F(Pml, ErrorsNameLineAndColumn) {
  Reply bad = put("broken", "<schema name=\"broken\">\n  <module>no name</module>\n</schema>");
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["code"], "invalid_pml");
  EXPECT_EQ(bad.body["error"]["line"], 2) << bad.raw;
  EXPECT_EQ(bad.body["error"]["column"], 3) << bad.raw;
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("line 2, column 3"), std::string::npos)
      << bad.raw;
  Reply xml = put("broken", "<schema name=\"broken\">\n<module name=\"a\">unclosed\n</schema>");
  EXPECT_EQ(xml.status, 400) << xml.raw;
  EXPECT_GE(xml.body["error"]["line"].get<int>(), 1) << xml.raw;
  Reply mismatch = put("a", R"(<schema name="b">x</schema>)");
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_NE(mismatch.raw.find("the URL names 'a'"), std::string::npos) << mismatch.raw;
  EXPECT_EQ(get(c, "/v1/schemas/broken").status, 404);

  // A prompt for an unknown schema, and one importing an unknown module.
  Reply unknown = post(c, "/v1/pml/completions", pml_request(R"(<prompt schema="nope"><user>hi</user></prompt>)"));
  EXPECT_EQ(unknown.status, 404) << unknown.raw;
  EXPECT_EQ(unknown.body["error"]["code"], "schema_not_found");
  EXPECT_NE(unknown.raw.find("PUT /v1/schemas/nope"), std::string::npos) << unknown.raw;
  ASSERT_EQ(put("story", kSchema).status / 100, 2);
  Reply mod = post(c, "/v1/pml/completions",
                   pml_request("<prompt schema=\"story\">\n  <dragon/><user>hi</user></prompt>"));
  EXPECT_EQ(mod.status, 400) << mod.raw;
  EXPECT_EQ(mod.body["error"]["param"], "prompt");
  EXPECT_EQ(mod.body["error"]["line"], 2) << mod.raw;
  Reply tail = post(c, "/v1/pml/completions", pml_request(R"(<prompt schema="story"><lily/></prompt>)"));
  EXPECT_EQ(tail.status, 400) << tail.raw;
}

// cache_reuse_blocks lists a chat prompt's blocks; a PML prompt is made of modules, so the
// route says so (400 naming the field) instead of answering an empty list.
TEST_F(Pml, CacheReuseBlocksIsRefusedNamingTheField) {
  const Reply schema = put("story", kSchema);  // 201 created, 200 when an earlier test put it
  ASSERT_TRUE(schema.status == 200 || schema.status == 201) << schema.raw;
  json req = pml_request(kPrompt);
  req["cache_reuse"] = "approximate";
  req["cache_reuse_blocks"] = true;
  Reply bad = post(c, "/v1/pml/completions", req);
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["error"]["param"], "cache_reuse_blocks") << bad.raw;
  req.erase("cache_reuse_blocks");
  Reply ok = post(c, "/v1/pml/completions", req);
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

TEST_F(Pml, SecondCompletionReusesModulesWithTheSameText) {
  ASSERT_EQ(put("story", kSchema, "?cache_salt=reuse").status / 100, 2);
  json req = pml_request(kPrompt);
  req["cache_salt"] = "reuse";
  Reply first = post(c, "/v1/pml/completions", req);
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["object"], "text_completion");
  const json& pc1 = first.body["promptcache"];
  EXPECT_EQ(pc1["module_hits"], 0) << pc1.dump();
  EXPECT_GE(pc1["module_misses"].get<int>(), 2) << pc1.dump();  // the root and lily
  EXPECT_EQ(first.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string text = first.body["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  Reply second = post(c, "/v1/pml/completions", req);
  ASSERT_EQ(second.status, 200) << second.raw;
  const int cached = second.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 20);
  EXPECT_LT(cached, second.body["usage"]["prompt_tokens"].get<int>());
  EXPECT_GE(second.body["promptcache"]["module_hits"].get<int>(), 2);
  EXPECT_EQ(second.body["promptcache"]["module_misses"], 0);
  EXPECT_EQ(second.body["choices"][0]["text"], text);  // cached modules, same logits

  // Streamed, with usage: the same text and report.
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = c.Post("/v1/pml/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  std::string streamed;
  json usage;
  for (const std::string& e : sse_events(r->body)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    if (j.contains("usage")) usage = j["usage"];
    else streamed += j["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], cached);

  // Deleting the schema drops its modules: re-registered, the prompt misses again.
  EXPECT_EQ(c.Delete("/v1/schemas/story?cache_salt=reuse")->status, 200);
  req.erase("stream");
  req.erase("stream_options");
  EXPECT_EQ(post(c, "/v1/pml/completions", req).status, 404);
  ASSERT_EQ(put("story", kSchema, "?cache_salt=reuse").status, 201);
  Reply again = post(c, "/v1/pml/completions", req);
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body["promptcache"]["module_hits"], 0);
  EXPECT_EQ(again.body["choices"][0]["text"], text);
}

}  // namespace
}  // namespace pc::test
