// Per-tenant resource bounds against a real server: a tenant over its bound gets a
// 429 naming it, and what it holds never changes what another tenant can do.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "server_fixture.h"
#include "test_util.h"

namespace pc::test {
namespace {

std::vector<std::string> keyed_args(const std::vector<std::string>& extra = {},
                                    const std::string& kv_memory = "64MiB") {
  const std::string keys = temp_dir() + "/bounds-keys.txt";
  std::ofstream(keys) << "key-a alice\nkey-b bob\nkey-ops ops\n";
  std::vector<std::string> a = {"-m", shared_path("models/stories260K.gguf"), "--kv-memory", kv_memory,
                                "--api-keys", keys, "--admin-tenant", "ops"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A schema of `modules` modules of about `bytes_each` bytes of text.
std::string schema(const std::string& name, int modules, size_t bytes_each = 40) {
  std::string s = "<schema name=\"" + name + "\"><system>You tell stories.</system>";
  for (int i = 0; i < modules; ++i) {
    std::string text;
    while (text.size() < bytes_each) text += "Lily had a red ball. ";
    s += "<module name=\"m" + std::to_string(i) + "\">" + text + "</module>";
  }
  return s + "</schema>";
}

Reply put(httplib::Client& c, const std::string& name, const std::string& text, const std::string& query = "") {
  auto r = c.Put(("/v1/schemas/" + name + query).c_str(), text, "application/xml");
  if (!r) throw std::runtime_error("PUT failed");
  return Reply{r->status, json::parse(r->body, nullptr, false), r->body};
}

TEST(TenantBounds, StoredSchemasAreBoundedPerTenant) {
  ServeProcess srv(keyed_args({"--tenant-max-schemas", "3", "--tenant-max-schema-modules", "12",
                               "--tenant-max-schema-bytes", "4KiB"}));
  auto a = srv.client("key-a"), b = srv.client("key-b");
  ASSERT_EQ(put(a, "s1", schema("s1", 4)).status, 201);
  ASSERT_EQ(put(a, "s2", schema("s2", 4), "?cache_salt=x").status, 201);  // salts count with the tenant
  // A schema of n modules holds n + 1 (its text outside modules is one). Modules: 10
  // held + 6 > 12.
  Reply over = put(a, "s3", schema("s3", 5));
  EXPECT_EQ(over.status, 429) << over.raw;
  EXPECT_EQ(over.body["error"]["code"], "tenant_quota_exceeded");
  EXPECT_NE(over.raw.find("--tenant-max-schema-modules"), std::string::npos) << over.raw;
  // Replacing a schema counts it once.
  EXPECT_EQ(put(a, "s1", schema("s1", 6)).status, 200);
  ASSERT_EQ(put(a, "s1", schema("s1", 4)).status, 200);
  ASSERT_EQ(put(a, "s3", schema("s3", 1)).status, 201);
  // Count: a fourth schema.
  over = put(a, "s4", schema("s4", 1));
  EXPECT_EQ(over.status, 429) << over.raw;
  EXPECT_NE(over.raw.find("--tenant-max-schemas"), std::string::npos) << over.raw;
  // Bytes: checked before compiling.
  over = put(a, "s1", schema("s1", 2, 3000));
  EXPECT_EQ(over.status, 429) << over.raw;
  EXPECT_NE(over.raw.find("--tenant-max-schema-bytes"), std::string::npos) << over.raw;
  // Bob's own bounds are untouched by alice's schemas.
  for (const char* n : {"t1", "t2", "t3"}) EXPECT_EQ(put(b, n, schema(n, 3)).status, 201) << n;
  // Deleting gives the room back.
  ASSERT_EQ(a.Delete("/v1/schemas/s3")->status, 200);
  EXPECT_EQ(put(a, "s4", schema("s4", 1)).status, 201);
}

int64_t context_length(httplib::Client& c) {
  const Reply m = get(c, "/v1/models");
  return m.body["data"][0]["context_length"].get<int64_t>();
}

std::string story(int i, int n) {
  std::string p = "Story " + std::to_string(i) + ".";
  for (int k = 0; k < n; ++k) p += " Lily had a red ball and a big dog.";
  return p;
}

// One tenant pinning its prompts can neither lower another tenant's context_length
// (which would also tell it the first one's pin volume) nor get it refused.
TEST(TenantBounds, PinsOfOneTenantNeverShrinkAnothersContext) {
  ServeProcess srv(keyed_args({"--tenant-kv-share", "0.2"}, "384KiB"));
  auto a = srv.client("key-a"), b = srv.client("key-b");
  const int64_t ctx_a = context_length(a), ctx_b = context_length(b);
  ASSERT_GT(ctx_a, 100);
  EXPECT_EQ(ctx_a, ctx_b);
  int pinned = 0;
  Reply refused;
  for (int i = 0; i < 20; ++i) {
    const json req = {{"prompt", story(i, 4)}, {"max_tokens", 1}, {"temperature", 0}};
    ASSERT_EQ(post(b, "/v1/completions", req).status, 200);
    const Reply p = post(b, "/v1/cache/pin", {{"prompt", story(i, 4)}});
    if (p.status == 200) {
      ++pinned;
      continue;
    }
    refused = p;
    break;
  }
  ASSERT_GT(pinned, 0);
  ASSERT_EQ(refused.status, 429) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "tenant_quota_exceeded");
  EXPECT_NE(refused.raw.find("--tenant-kv-share"), std::string::npos) << refused.raw;
  // Bob's own context shrank by what he holds; alice's did not move.
  EXPECT_LT(context_length(b), ctx_b);
  EXPECT_EQ(context_length(a), ctx_a);
  // Alice's request using all of her context still runs.
  std::string prompt;
  for (int k = 0; prompt.size() < 4000; ++k) prompt += " Tom ran to the park.";
  json req = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  const Reply tok = post(a, "/tokenize", {{"content", prompt}});
  const int64_t n = int64_t(tok.body["tokens"].size());
  ASSERT_GT(n, ctx_a) << tok.raw;
  // The first ctx_a - 8 of those tokens, as token ids.
  req["prompt"] = json(std::vector<json>(tok.body["tokens"].begin(), tok.body["tokens"].begin() + (ctx_a - 8)));
  req["max_tokens"] = 4;
  const Reply big = post(a, "/v1/completions", req);
  EXPECT_EQ(big.status, 200) << big.raw;
}

// A tenant with --tenant-max-requests in flight gets 429 for more; another tenant's
// request is still taken.
TEST(TenantBounds, RequestsInFlightAreBoundedPerTenant) {
  ServeProcess srv(keyed_args({"--parallel", "1", "--queue", "6", "--tenant-max-requests", "2"}));
  const json slow = {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"temperature", 0},
                     {"ignore_eos", true}};
  std::vector<std::thread> held;
  std::vector<int> statuses(2, 0);
  for (int i = 0; i < 2; ++i)
    held.emplace_back([&, i] {
      auto c = srv.client("key-a");
      c.set_read_timeout(120, 0);
      statuses[i] = post(c, "/v1/completions", slow).status;
    });
  auto ops = srv.client("key-ops");
  bool both = false;
  for (int i = 0; i < 200 && !both; ++i) {
    const Reply h = get(ops, "/health");
    both = h.body.value("running", 0) + h.body.value("queued", 0) == 2;
    if (!both) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(both) << "alice's two requests never were in flight together";
  auto a = srv.client("key-a"), b = srv.client("key-b");
  b.set_read_timeout(120, 0);
  const json quick = {{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}};
  const Reply third = post(a, "/v1/completions", quick);
  EXPECT_EQ(third.status, 429) << third.raw;
  EXPECT_EQ(third.body["error"]["code"], "tenant_quota_exceeded");
  EXPECT_NE(third.raw.find("--tenant-max-requests"), std::string::npos) << third.raw;
  EXPECT_EQ(post(b, "/v1/completions", quick).status, 200);
  for (std::thread& t : held) t.join();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
  EXPECT_EQ(post(a, "/v1/completions", quick).status, 200);  // room again
}

double rss_mib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return -1;
}

// A large schema's memory goes back to the system once it is deleted (two malloc
// arenas and malloc_trim, server/malloc_policy.h): the server does not keep the peak.
TEST(TenantBounds, DeletedSchemaMemoryIsReturned) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--kv-memory", "16MiB",
                    "--tenant-max-schema-modules", "100000", "--tenant-max-schema-bytes", "8MiB"});
  auto c = srv.client();
  const double start = rss_mib(srv.pid());
  std::string s = "<schema name=\"big\">";
  for (int i = 0; i < 60000; ++i) s += "<module name=\"m" + std::to_string(i) + "\">x" + std::to_string(i) + "</module>";
  s += "</schema>";
  ASSERT_EQ(put(c, "big", s).status, 201);
  const double held = rss_mib(srv.pid());
  ASSERT_EQ(c.Delete("/v1/schemas/big")->status, 200);
  const double after = rss_mib(srv.pid());
  EXPECT_GT(held - start, 40) << "the schema should hold tens of MiB (start " << start << ", held " << held << ")";
  EXPECT_LT(after - start, 12) << "start " << start << " MiB, with the schema " << held << " MiB, after DELETE "
                               << after << " MiB";
}

}  // namespace
}  // namespace pc::test
