// The engine with its disk and Redis tiers (engine/kv_tiers.h): prefixes and PML modules
// written through to the tiers are reused after a restart and by a second engine sharing
// Redis, with logits and greedy text bitwise equal to computing everything; corrupt
// entries are recomputed; a Redis that dies and comes back neither stops the engine nor
// stays unused, and one that restarts empty is written again by the engines holding
// its entries.
#include "engine/kv_tiers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "pml/compiled_plan.h"
#include "kv/radix_index.h"
#include "common/error.h"
#include "model/model.h"
#include "pml/pml.h"
#include "test_util.h"
#include "tier/disk_tier.h"
#include "tier/redis_tier.h"
#include "tier/tier_fixture.h"
#include "engine_test_peer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

namespace fs = std::filesystem;

const char* kSchema = R"(<schema name="story">
  Once upon a time there was a
  <module name="dog">little dog named Max. He liked to run in the park with his ball every day.</module>
  <module name="reply">The story is told in <parameter name="lang" length="10">English</parameter>, slowly.</module>
  <module name="cat">big cat named Tom. He liked to sleep in the sun all day long and eat fish.</module>
</schema>)";

struct EngineTiersTest : ::testing::Test {
  std::unique_ptr<Model> model = Model::load(test::shared_dir() + "/models/stories260K.gguf");
  pml::Encoder enc = pml::Encoder::for_model(model->tokenizer(), model->file());
  pml::SchemaLayout schema = pml::compile_schema(kSchema, enc, "story.pml");
  std::string dir = test::temp_dir() + "/disk";
  std::vector<int32_t> prompt;  // 70 tokens: 4 whole pages + 6

  void SetUp() override {
    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> d(3, int32_t(model->config().n_vocab) - 1);
    prompt.push_back(1);
    for (int i = 0; i < 69; ++i) prompt.push_back(d(rng));
  }
  pml::PromptPlan plan(const std::string& body) {
    return pml::plan_prompt("<prompt schema=\"story\">" + body + "</prompt>", schema, enc, "p.pml");
  }
  std::unique_ptr<Engine> engine(const std::string& disk, const std::string& redis = "",
                                 int64_t kv = 16 << 20, KvType kv_type = KvType::kF16) {
    EngineOptions o;
    o.kv_memory_bytes = kv;
    o.kv_type = kv_type;
    o.tiers.disk_dir = disk;
    o.tiers.disk_fsync = false;
    o.tiers.redis_url = redis;
    return std::make_unique<Engine>(*model, o);
  }
  GenerateRequest greedy(std::vector<int32_t> p, int n = 8) {
    GenerateRequest r;
    r.prompt = std::move(p);
    r.max_tokens = n;
    r.sampling.temperature = 0;
    r.stop_at_eog = false;
    return r;
  }
};

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what;
}

TEST_F(EngineTiersTest, PrefixSurvivesRestart) {
  auto none = engine("");
  EXPECT_EQ(EngineTestPeer::tiers(*none), nullptr);
  const std::vector<float> want = prompt_logits(*none, prompt, 64);
  const GenerateResult cold = none->generate(greedy(prompt));
  {
    auto a = engine(dir);
    const GenerateResult r = a->generate(greedy(prompt));
    EXPECT_EQ(r.tokens, cold.tokens);
    EXPECT_EQ(r.n_promoted, 0);
    a->flush_tiers();
    EXPECT_GE(EngineTestPeer::tiers(*a)->stats().writes, 1);
    EXPECT_GE(EngineTestPeer::tiers(*a)->tier_stats()[0].entries, 1);
  }
  {  // restart: memory is empty, the disk has prompt + generated tokens (page-aligned)
    auto b = engine(dir);
    const GenerateResult r = b->generate(greedy(prompt));
    EXPECT_EQ(r.tokens, cold.tokens);
    EXPECT_EQ(r.n_cached, 64);  // 4 whole pages of the 69 before the last prompt token
    EXPECT_EQ(r.n_promoted, 64);
    EXPECT_EQ(EngineTestPeer::tiers(*b)->stats().hits, std::vector<int64_t>{1});  // the disk
  }
  {  // logits of the uncached positions after a restart, bitwise
    auto c = engine(dir);
    int64_t n_cached = 0;
    const std::vector<float> got = prompt_logits(*c, prompt, 16, true, &n_cached);
    ASSERT_EQ(n_cached, 64);
    const int64_t V = model->config().n_vocab;
    ASSERT_EQ(got.size(), size_t(6 * V));
    EXPECT_EQ(0, std::memcmp(got.data(), want.data() + 64 * V, got.size() * sizeof(float)));
  }
}

// Quantized KV through the disk tier: entries hold the type's bytes, a restarted
// engine of that type reuses them with logits bitwise those of computing in that type.
TEST_F(EngineTiersTest, QuantizedPrefixSurvivesRestart) {
  const int64_t V = model->config().n_vocab;
  for (KvType t : {KvType::kQ8_0, KvType::kQ4_0}) {
    SCOPED_TRACE(kv_type_name(t));
    const std::string d = dir + "-" + kv_type_name(t);
    const std::vector<float> want = prompt_logits(*engine("", "", 16 << 20, t), prompt, 64);
    {
      auto a = engine(d, "", 16 << 20, t);
      a->generate(greedy(prompt));
      a->flush_tiers();
      EXPECT_GE(EngineTestPeer::tiers(*a)->stats().writes, 1);
    }
    auto b = engine(d, "", 16 << 20, t);
    int64_t n_cached = 0;
    const std::vector<float> got = prompt_logits(*b, prompt, 16, true, &n_cached);
    ASSERT_EQ(n_cached, 64);
    ASSERT_EQ(got.size(), size_t(6 * V));
    EXPECT_EQ(0, std::memcmp(got.data(), want.data() + 64 * V, got.size() * sizeof(float)));
  }
}

// Entries of different KV types never mix: a disk tier written by an f16 engine is a
// miss for a q8_0 engine (and the other way round), which computes in its own type.
TEST_F(EngineTiersTest, KvTypesNeverShareEntries) {
  const int64_t V = model->config().n_vocab;
  for (auto [writer, reader] : {std::pair{KvType::kF16, KvType::kQ8_0}, std::pair{KvType::kQ8_0, KvType::kF16},
                                std::pair{KvType::kQ8_0, KvType::kQ4_0}}) {
    SCOPED_TRACE(std::string(kv_type_name(writer)) + " written, " + kv_type_name(reader) + " reading");
    const std::string d = dir + "-" + kv_type_name(writer) + "-" + kv_type_name(reader);
    {
      auto a = engine(d, "", 16 << 20, writer);
      a->generate(greedy(prompt));
      a->flush_tiers();
      EXPECT_GE(EngineTestPeer::tiers(*a)->stats().writes, 1);
    }
    const std::vector<float> want = prompt_logits(*engine("", "", 16 << 20, reader), prompt, 64);
    auto b = engine(d, "", 16 << 20, reader);
    int64_t n_cached = 0;
    const std::vector<float> got = prompt_logits(*b, prompt, 16, true, &n_cached);
    EXPECT_EQ(n_cached, 0);
    EXPECT_EQ(EngineTestPeer::tiers(*b)->stats().hits, std::vector<int64_t>{0});
    ASSERT_EQ(got.size(), size_t(70 * V));
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  }
}

TEST_F(EngineTiersTest, EvictedFromMemoryComesBackFromDisk) {
  // Memory for ~2 prompts: others push the first one out, the disk brings it back.
  const int64_t page = int64_t(model->config().n_layer) * model->config().n_kv_head *
                       model->config().head_dim * 2 * 2 * 16;
  auto e = engine(dir, "", 12 * page);
  const GenerateResult first = e->generate(greedy(prompt, 4));
  e->flush_tiers();
  for (int k = 0; k < 4; ++k) {
    std::vector<int32_t> other = prompt;
    other[1] = 5 + k;  // diverges at token 1: nothing shared beyond BOS
    e->generate(greedy(other, 4));
    e->flush_tiers();
  }
  EXPECT_GT(EngineTestPeer::index(*e).stats().evicted, 0);
  const GenerateResult again = e->generate(greedy(prompt, 4));
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.n_cached, 64);
  EXPECT_EQ(again.n_promoted, 63);  // BOS was still in memory (shared by the others)
}

TEST_F(EngineTiersTest, CorruptEntryIsRecomputed) {
  GenerateResult cold;
  {
    auto a = engine(dir);
    cold = a->generate(greedy(prompt));
    a->flush_tiers();
  }
  int corrupted = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".kv") continue;
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-100, std::ios::end);  // a byte of the KV payload
    io.put('\x5a');
    ++corrupted;
  }
  ASSERT_GE(corrupted, 1);
  auto b = engine(dir);
  const GenerateResult r = b->generate(greedy(prompt));
  EXPECT_EQ(r.tokens, cold.tokens);
  EXPECT_EQ(r.n_cached, 0);
  EXPECT_GE(EngineTestPeer::tiers(*b)->tier_stats()[0].corrupt_deleted, 1);
  EXPECT_EQ(EngineTestPeer::tiers(*b)->stats().misses, 1);
}

TEST_F(EngineTiersTest, ModulesSurviveRestart) {
  const auto p = plan("<dog/><reply lang=\"French\"/><cat/> One day Max saw a bird.");
  std::vector<float> want;
  {
    auto a = engine(dir);
    want = plan_logits(*a, pml::kv_plan(p, schema));
    a->flush_tiers();
  }
  auto b = engine(dir);
  expect_bitwise(want, plan_logits(*b, pml::kv_plan(p, schema)), "modules restored from disk");
  EXPECT_GE(EngineTestPeer::tiers(*b)->stats().module_loads, 3);  // dog, reply, cat (and context text)
  GenerateRequest req = greedy({});
  const GenerateResult r = b->generate_plan(pml::kv_plan(p, schema), req);
  EXPECT_EQ(r.n_module_misses, 0);
  auto fresh = engine("");
  const GenerateResult cold = fresh->generate_plan(pml::kv_plan(p, schema), req);
  EXPECT_EQ(r.tokens, cold.tokens);
  EXPECT_GT(cold.n_module_misses, 0);
}

TEST_F(EngineTiersTest, TwoEnginesShareRedisAndRefillItAfterItRestartsEmpty) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  const auto p = plan("<cat/><dog/> The end.");
  auto a = engine("", redis.url());
  const GenerateResult ra = a->generate_plan(pml::kv_plan(p, schema), greedy({}));
  EXPECT_GT(ra.n_module_misses, 0);
  a->generate(greedy(prompt));
  a->flush_tiers();
  const std::vector<float> want = plan_logits(*a, pml::kv_plan(p, schema));

  auto b = engine("", redis.url());  // a second server: nothing in its memory
  const GenerateResult rb = b->generate_plan(pml::kv_plan(p, schema), greedy({}));
  EXPECT_EQ(rb.n_module_misses, 0);
  EXPECT_GT(rb.n_promoted, 0);
  EXPECT_EQ(rb.tokens, ra.tokens);
  expect_bitwise(want, plan_logits(*b, pml::kv_plan(p, schema)), "modules from Redis");
  const GenerateResult pb = b->generate(greedy(prompt));
  EXPECT_EQ(pb.n_promoted, 64);
  ASSERT_EQ(EngineTestPeer::tiers(*b)->tiers().size(), 1u);
  EXPECT_STREQ(EngineTestPeer::tiers(*b)->tiers()[0]->name(), "redis");
  EXPECT_GE(EngineTestPeer::tiers(*b)->stats().hits[0], 2);

  // Redis restarts empty: b, whose modules came from Redis, writes them again, so a
  // third server finds them all there.
  a.reset();
  b->poll_tiers();  // reads the generation Redis has now
  b->flush_tiers();
  redis.kill();
  ASSERT_TRUE(redis.start());  // no persistence: empty
  EXPECT_EQ(test::redis_int(redis.port(), {"DBSIZE"}), 0);
  // The generation check runs every second; the reconnect back-off is at most 2 s.
  for (int i = 0; i < 100 && EngineTestPeer::tiers(*b)->stats().tier_resets == 0; ++i) {
    b->poll_tiers();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(EngineTestPeer::tiers(*b)->stats().tier_resets, 1);
  b->flush_tiers();
  EXPECT_GE(EngineTestPeer::tiers(*b)->stats().rewritten, 4);  // the prompt's prefix, dog, reply, cat
  auto c = engine("", redis.url());
  const GenerateResult rc = c->generate_plan(pml::kv_plan(p, schema), greedy({}));
  EXPECT_EQ(rc.n_module_misses, 0);
  EXPECT_EQ(rc.tokens, ra.tokens);
  expect_bitwise(want, plan_logits(*c, pml::kv_plan(p, schema)), "modules written again");
  EXPECT_EQ(c->generate(greedy(prompt)).n_promoted, 64);
}

// Redis restarting empty: the rewrite covers the chain of prompt + reply (96 of 99
// tokens here), which holds the prompt's own 64 tokens (what a repeat probes).
TEST_F(EngineTiersTest, RedisRestartRewritesThePromptsEntryToo) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  auto a = engine("", redis.url());
  const GenerateResult ra = a->generate(greedy(prompt, 30));
  a->flush_tiers();
  EXPECT_EQ(EngineTestPeer::tiers(*a)->stats().writes, 6);  // the links of 96 tokens; the prompt's 64 share them
  a->poll_tiers();  // reads the generation Redis has now
  a->flush_tiers();
  redis.kill();
  ASSERT_TRUE(redis.start());  // no persistence: empty
  for (int i = 0; i < 100 && EngineTestPeer::tiers(*a)->stats().tier_resets == 0; ++i) {
    a->poll_tiers();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(EngineTestPeer::tiers(*a)->stats().tier_resets, 1);
  a->flush_tiers();
  EXPECT_EQ(EngineTestPeer::tiers(*a)->stats().rewritten, 6);
  auto b = engine("", redis.url());
  const GenerateResult rb = b->generate(greedy(prompt, 30));
  EXPECT_EQ(rb.n_promoted, 64);
  EXPECT_EQ(rb.tokens, ra.tokens);
}

TEST_F(EngineTiersTest, RedisHitIsCopiedToDisk) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.available()) << "redis-server is not installed (scripts/setup.sh installs it)";
  ASSERT_TRUE(redis.running());
  {
    auto a = engine("", redis.url());  // another server, without a disk
    a->generate(greedy(prompt));
    a->flush_tiers();
  }
  {
    auto b = engine(dir, redis.url());
    const std::vector<const KvTier*> tiers = EngineTestPeer::tiers(*b)->tiers();
    ASSERT_EQ(tiers.size(), 2u);
    EXPECT_STREQ(tiers[0]->name(), "disk");
    EXPECT_STREQ(tiers[1]->name(), "redis");
    EXPECT_EQ(b->generate(greedy(prompt, 0)).n_promoted, 64);
    EXPECT_EQ(EngineTestPeer::tiers(*b)->stats().hits, (std::vector<int64_t>{0, 1}));
    EXPECT_GE(EngineTestPeer::tiers(*b)->tier_stats()[0].entries, 1);  // the copy
  }
  redis.kill();
  auto c = engine(dir);  // a restart with the disk alone finds the copy
  EXPECT_EQ(c->generate(greedy(prompt, 0)).n_promoted, 64);
  EXPECT_EQ(EngineTestPeer::tiers(*c)->stats().hits, std::vector<int64_t>{1});
}

TEST_F(EngineTiersTest, RedisDownKeepsServingAndReconnects) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.available());
  auto e = engine("", redis.url());
  const GenerateResult first = e->generate(greedy(prompt));
  e->flush_tiers();
  EXPECT_EQ(EngineTestPeer::tiers(*e)->stats().writes, 4);  // 4 links of 16 tokens
  redis.kill();
  std::vector<int32_t> other = prompt;
  other[1] = 7;
  const GenerateResult r = e->generate(greedy(other));  // lookup and write fail fast
  e->flush_tiers();
  EXPECT_EQ(r.n_cached, 1);  // BOS from memory
  EXPECT_EQ(EngineTestPeer::tiers(*e)->stats().write_failures, 4);
  EXPECT_EQ(e->generate(greedy(prompt)).tokens, first.tokens);  // memory still serves
  ASSERT_TRUE(redis.start());
  // The back-off is at most 2 s: a write after it reaches the restarted server.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  other[1] = 8;
  e->generate(greedy(other));
  e->flush_tiers();
  EXPECT_EQ(EngineTestPeer::tiers(*e)->stats().writes, 8);
}

TEST_F(EngineTiersTest, CancelWhilePromoting) {
  {
    auto a = engine(dir);
    a->generate(greedy(prompt));
    a->flush_tiers();
  }
  auto b = engine(dir);
  const int64_t id = b->add(greedy(prompt));
  b->cancel(id);  // before the lookup answered
  for (int i = 0; i < 20 && EngineTestPeer::tiers(*b)->in_flight() > 0; ++i) b->step();
  b->flush_tiers();
  EXPECT_TRUE(b->idle());
  EXPECT_EQ(EngineTestPeer::page_pool(*b).n_in_use(), 0);
  EXPECT_EQ(b->generate(greedy(prompt)).n_cached, 64);  // restored anyway, now in memory
}

// What the radix index counted: its stats and each node's hits, depth first.
struct RadixCounts {
  int64_t hits = 0, misses = 0, hit_tokens = 0;
  std::vector<std::pair<size_t, int64_t>> nodes;  // (tokens, hits) per node
  bool operator==(const RadixCounts&) const = default;
};

RadixCounts radix_counts(Engine& e) {
  const RadixStats s = EngineTestPeer::index(e).stats();
  RadixCounts c{s.hits, s.misses, s.hit_tokens, {}};
  std::set<int32_t> seen;
  EngineTestPeer::index(e).for_each_leaf(e.ns(""), [&](int32_t leaf) {
    for (int32_t n = leaf; n >= 0 && seen.insert(n).second;) {
      const RadixIndex::NodeView v = EngineTestPeer::index(e).node(n);
      if (v.parent < 0) break;  // the root
      c.nodes.emplace_back(v.tokens.size(), v.hits);
      n = v.parent;
    }
  });
  return c;
}

// Regression: tier checks (the promotion probe, write-through snapshots) used to count
// as radix matches, so the same requests reported more hits with a tier configured.
TEST_F(EngineTiersTest, DiskTierDoesNotChangeRadixCounts) {
  const std::vector<int32_t> p(prompt.begin(), prompt.begin() + 37);
  // 8 generated tokens: two links written (32 tokens); 40: four (64 tokens; the
  // prompt's 32 are the first two).
  for (int gen : {8, 40}) {
    SCOPED_TRACE(gen);
    auto run = [&](const std::string& disk) {
      fs::remove_all(dir);
      auto e = engine(disk);
      for (int i = 0; i < 2; ++i) {
        e->generate(greedy(p, gen));
        e->flush_tiers();
      }
      if (!disk.empty()) {
        EXPECT_EQ(EngineTestPeer::tiers(*e)->stats().writes, gen == 8 ? 2 : 4);
      }
      return radix_counts(*e);
    };
    const RadixCounts plain = run("");
    EXPECT_EQ(plain.hits, 1);
    EXPECT_EQ(plain.hit_tokens, 36);
    EXPECT_EQ(plain.misses, 1);
    const RadixCounts tiered = run(dir);
    EXPECT_EQ(tiered.hits, plain.hits);
    EXPECT_EQ(tiered.misses, plain.misses);
    EXPECT_EQ(tiered.hit_tokens, plain.hit_tokens);
    EXPECT_EQ(tiered.nodes, plain.nodes);  // no extra split: node counts and hits alike
    EXPECT_FALSE(plain.nodes.empty());
  }
}

TEST_F(EngineTiersTest, BadOptionsAreErrors) {
  EXPECT_THROW(engine("", "redis://host:notaport"), Error);
  const std::string file = test::temp_dir() + "/plain-file";
  std::ofstream(file) << "x";
  EXPECT_THROW(engine(file), Error);
}

}  // namespace
}  // namespace pc
