// Content-defined chunks of long parts (server/chat/content_chunks.h): boundaries that
// depend only on the tokens, and, through a real `promptcache serve`, a paragraph moved
// inside one message string reused approximately while exact answers stay cold-equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "server/chat/content_chunks.h"
#include "server_fixture.h"

namespace pc::test {
namespace {

using server::ChunkOptions;
using server::content_chunks;

std::vector<int32_t> random_ids(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = int32_t(rng() % 5000);
  return v;
}

// The boundaries of text X, as offsets into X, wherever X sits in the tokens.
std::vector<int32_t> cuts_in(const std::vector<KvBlock>& chunks, int32_t x_begin, int32_t x_end) {
  std::vector<int32_t> out;
  for (const KvBlock& c : chunks)
    if (c.begin > x_begin && c.begin < x_end - ChunkOptions{}.min_chunk) out.push_back(c.begin - x_begin);  // not in the tail a block end absorbs
  return out;
}

TEST(ContentChunks, CoverTheBlockInOrderWithinMinAndMax) {
  const std::vector<int32_t> ids = random_ids(1, 3000);
  const ChunkOptions o;
  const std::vector<KvBlock> c = content_chunks(ids, {}, {100, 2900}, o);
  ASSERT_GT(c.size(), 5u);
  EXPECT_EQ(c.front().begin, 100);
  EXPECT_EQ(c.back().end, 2900);
  for (size_t i = 0; i < c.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(c[i].begin, c[i - 1].end);
    }
    EXPECT_GE(c[i].end - c[i].begin, o.min_chunk);
    EXPECT_LE(c[i].end - c[i].begin, o.max_chunk + o.min_chunk);  // the last absorbs a short tail
  }
  // A short part stays one block.
  EXPECT_EQ(content_chunks(ids, {}, {0, o.min_part - 1}).size(), 1u);
}

TEST(ContentChunks, SameTextSameBoundariesAtAnyPositionAndInAnyRequest) {
  const std::vector<int32_t> x = random_ids(7, 1200);
  const std::vector<KvBlock> alone = content_chunks(x, {}, {0, int32_t(x.size())});
  const std::vector<int32_t> want = cuts_in(alone, 0, int32_t(x.size()));
  ASSERT_GT(want.size(), 4u);
  for (int pre : {0, 1, 5, 37, 333}) {
    // X after `pre` other tokens in the same part, followed by more text.
    std::vector<int32_t> ids = random_ids(100 + pre, pre);
    const int32_t xb = int32_t(ids.size());
    ids.insert(ids.end(), x.begin(), x.end());
    const int32_t xe = int32_t(ids.size());
    const std::vector<int32_t> tail = random_ids(200 + pre, 300);
    ids.insert(ids.end(), tail.begin(), tail.end());
    const std::vector<int32_t> got = cuts_in(content_chunks(ids, {}, {0, int32_t(ids.size())}), xb, xe);
    // Once in step (at the first boundary both have), every later boundary of X is
    // where X alone has it, and X alone has no other; in step within two chunks.
    const auto first = std::find_first_of(got.begin(), got.end(), want.begin(), want.end());
    ASSERT_NE(first, got.end()) << "prefix " << pre;
    EXPECT_LT(*first, 2 * ChunkOptions{}.max_chunk) << "prefix " << pre;
    const std::vector<int32_t> got_after(first, got.end());
    const std::vector<int32_t> want_after(std::find(want.begin(), want.end(), *first), want.end());
    EXPECT_EQ(got_after, want_after) << "prefix " << pre;
    if (pre == 0) {
      EXPECT_EQ(got, want);
    }
  }
}

TEST(ContentChunks, ParagraphBreaksAreBoundaries) {
  const std::vector<int32_t> ids = random_ids(3, 400);
  std::vector<uint8_t> breaks(ids.size(), 0);
  breaks[99] = breaks[199] = 1;
  ChunkOptions only_breaks;
  only_breaks.hash_period = 1 << 30;  // no hash boundary in 400 tokens, but by a 1-in-2^30 chance
  const std::vector<KvBlock> c = content_chunks(ids, breaks, {0, 400}, only_breaks);
  std::vector<int32_t> begins;
  for (const KvBlock& k : c) begins.push_back(k.begin);
  EXPECT_NE(std::find(begins.begin(), begins.end(), 100), begins.end());
  EXPECT_NE(std::find(begins.begin(), begins.end(), 200), begins.end());
  const std::string text = "ab\n\ncd";
  const std::vector<int64_t> offsets = {0, 2, 3, 4, 6};  // "ab" "\n" "\n" "cd"
  EXPECT_EQ(server::paragraph_breaks(text, offsets, 4), (std::vector<uint8_t>{0, 0, 1, 0}));
}

// A user message of three paragraphs in one string, re-ordered.
const char* kSys = "You answer questions about the stories the user gives you.";
const char* kParas[] = {
    "Once upon a time there was a little dog named Max who liked to run in the park. He ran past the big "
    "tree and the small pond every morning, and he barked at the ducks that swam there.",
    "Lily had a red ball and she loved to throw it high into the blue sky every day. Her brother Tom "
    "caught it and threw it back, and they laughed until the sun went down behind the hill.",
    "Tom and his mom went to the big shop to buy some apples and a warm loaf of bread. The shop was "
    "full of people, and a kind old man gave Tom a sweet red candy for the walk home.",
};

json story_body(const std::vector<int>& order, const std::string& salt, const char* mode, double budget) {
  std::string text;
  for (int i : order) text += std::string(kParas[i]) + " " + kParas[i] + "\n\n";  // ~150 tokens each
  text += "Who went to the shop?";
  json b = {{"messages", json::array({{{"role", "system"}, {"content", kSys}}, {{"role", "user"}, {"content", text}}})},
            {"max_tokens", 4}, {"temperature", 0}, {"cache_salt", salt}, {"logprobs", true}, {"top_logprobs", 3},
            {"cache_reuse", mode}};
  if (budget >= 0) b["cache_reuse_budget"] = budget;
  return b;
}

TEST(ContentChunks, MovedParagraphInsideAMessageIsReusedAndExactStaysExact) {
  ServeProcess srv({"-m", shared_path("models/stories260K.gguf"), "--chat-template-file",
                    shared_path("templates-2026/Qwen-Qwen2.5-7B-Instruct.jinja"), "--kv-memory", "64MiB"});
  auto c = srv.client();
  ASSERT_EQ(post(c, "/v1/chat/completions", story_body({0, 1, 2}, "s", "exact", -1)).status, 200);
  const Reply cold = post(c, "/v1/chat/completions", story_body({2, 0, 1}, "cold", "exact", -1));
  ASSERT_EQ(cold.status, 200) << cold.raw;
  const json& cold_lp = cold.body["choices"][0]["logprobs"];

  // A second namespace that saw the first order too, for the budget-1 request below (a
  // budget-1 request computes everything, so it publishes its prompt as exact KV).
  ASSERT_EQ(post(c, "/v1/chat/completions", story_body({0, 1, 2}, "full", "exact", -1)).status, 200);

  // Budget 0: the moved paragraphs come from the first request's KV.
  const Reply approx = post(c, "/v1/chat/completions", story_body({2, 0, 1}, "s", "approximate", 0.0));
  ASSERT_EQ(approx.status, 200) << approx.raw;
  const json& p = approx.body["promptcache"];
  const int64_t prompt = approx.body["usage"]["prompt_tokens"];
  EXPECT_GT(p["approximate_tokens"].get<int64_t>(), prompt / 4) << approx.raw;

  // An exact request afterwards answers as a cold run does, bit for bit.
  const Reply exact = post(c, "/v1/chat/completions", story_body({2, 0, 1}, "s", "exact", -1));
  ASSERT_EQ(exact.status, 200) << exact.raw;
  EXPECT_EQ(exact.body["promptcache"]["approximate_tokens"], 0);
  EXPECT_EQ(exact.body["choices"][0]["logprobs"], cold_lp) << exact.raw;

  // Budget 1 with chunk blocks: every moved token recomputed, bitwise the full computation.
  const Reply full = post(c, "/v1/chat/completions", story_body({2, 0, 1}, "full", "approximate", 1.0));
  ASSERT_EQ(full.status, 200) << full.raw;
  EXPECT_GT(full.body["promptcache"]["recomputed_tokens"].get<int64_t>(), prompt / 4) << full.raw;
  EXPECT_EQ(full.body["choices"][0]["logprobs"], cold_lp) << full.raw;
}

}  // namespace
}  // namespace pc::test
