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
  EXPECT_EQ(server::paragraph_breaks(text, offsets, 4), (std::vector<uint8_t>{0, 0, server::kParagraphEnd, 0}));
  // A tokenizer that merges the blank line with the next word: the paragraph starts
  // inside that token, and the boundary falls before it.
  const std::vector<int64_t> merged = {0, 2, 6};  // "ab" "\n\ncd"
  EXPECT_EQ(server::paragraph_breaks(text, merged, 2), (std::vector<uint8_t>{0, server::kParagraphStart}));
  std::vector<uint8_t> starts(ids.size(), 0);
  starts[150] = server::kParagraphStart;
  std::vector<int32_t> begins_before;
  for (const KvBlock& k : content_chunks(ids, starts, {0, 400}, only_breaks)) begins_before.push_back(k.begin);
  EXPECT_EQ(begins_before, (std::vector<int32_t>{0, 150})) << "a cut before token 150, none elsewhere";
}

// The document X (a header line, then text) chunks the same at the start of a message's
// content (after the role line the template renders inside the message, a few tokens
// shorter than min_chunk) and after another document's paragraph break: it starts a chunk
// in both, so a document moved to or from the top of a message is found.
TEST(ContentChunks, AContentStartsAChunkLikeAParagraph) {
  const ChunkOptions o;
  const std::vector<int32_t> x = random_ids(11, 500);
  const std::vector<int32_t> other = random_ids(12, 300);
  // Top: [role line: 2 tokens][X][tail]; moved: [role line][other ¶][X][tail].
  auto layout = [&](bool moved, int32_t* xb) {
    std::vector<int32_t> ids = {9001, 9002};
    std::vector<uint8_t> breaks(2, 0);
    if (moved) {
      ids.insert(ids.end(), other.begin(), other.end());
      breaks.resize(ids.size(), 0);
      breaks.back() = server::kParagraphEnd;
    }
    *xb = int32_t(ids.size());
    ids.insert(ids.end(), x.begin(), x.end());
    breaks.resize(ids.size(), 0);
    breaks[2] |= server::kContentStart;
    breaks.back() = server::kParagraphEnd;
    const std::vector<int32_t> tail = random_ids(13, 12);  // a question shorter than min_chunk
    ids.insert(ids.end(), tail.begin(), tail.end());
    breaks.resize(ids.size(), 0);
    return std::make_pair(ids, breaks);
  };
  int32_t top_b = 0, moved_b = 0;
  const auto [top_ids, top_breaks] = layout(false, &top_b);
  const auto [moved_ids, moved_breaks] = layout(true, &moved_b);
  const std::vector<KvBlock> top = content_chunks(top_ids, top_breaks, {0, int32_t(top_ids.size())}, o);
  const std::vector<KvBlock> moved = content_chunks(moved_ids, moved_breaks, {0, int32_t(moved_ids.size())}, o);
  ASSERT_GE(top.size(), 3u);
  EXPECT_EQ(top[0].end - top[0].begin, 2) << "the role line is a chunk of its own";
  // X's chunks (and the question's) as offsets from X's start: the same in both.
  auto from = [](const std::vector<KvBlock>& c, int32_t xb) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (const KvBlock& k : c)
      if (k.begin >= xb) out.push_back({k.begin - xb, k.end - xb});
    return out;
  };
  const auto a = from(top, top_b), b = from(moved, moved_b);
  EXPECT_EQ(a, b);
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a.front().first, 0);
  EXPECT_EQ(a.back(), std::make_pair(int32_t(x.size()), int32_t(x.size()) + 12)) << "the question is a chunk";
  // X's last chunk ends at X's paragraph break: no hash boundary leaves a piece under
  // min_chunk before it.
  EXPECT_GE(a[a.size() - 2].second - a[a.size() - 2].first, o.min_chunk);
  // Without the content start, X's first chunk would hold the role line too.
  std::vector<uint8_t> no_start = top_breaks;
  no_start[2] = 0;
  EXPECT_EQ(content_chunks(top_ids, no_start, {0, int32_t(top_ids.size())}, o).front().begin, 0);
  EXPECT_GT(content_chunks(top_ids, no_start, {0, int32_t(top_ids.size())}, o).front().end, 2);
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

  // Budget 0: the moved paragraphs come from the first request's KV — every chunk of
  // the message after the exact prefix, the one that moved to the top of the message
  // too (promptcache.blocks, asked with cache_reuse_blocks).
  json body = story_body({2, 0, 1}, "s", "approximate", 0.0);
  body["cache_reuse_blocks"] = "yes";
  const Reply bad = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.raw.find("cache_reuse_blocks"), std::string::npos) << bad.raw;
  body["cache_reuse_blocks"] = true;
  const Reply approx = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(approx.status, 200) << approx.raw;
  const json& p = approx.body["promptcache"];
  const int64_t prompt = approx.body["usage"]["prompt_tokens"];
  EXPECT_GT(p["approximate_tokens"].get<int64_t>(), prompt / 2) << approx.raw;
  ASSERT_TRUE(p.contains("blocks")) << approx.raw;
  int found = 0;
  int64_t found_tokens = 0;
  for (const json& b : p["blocks"]) {
    EXPECT_NE(b["source"], "computed") << b.dump() << "\n" << approx.raw;
    if (b["source"] == "found") ++found, found_tokens += b["end"].get<int64_t>() - b["begin"].get<int64_t>();
  }
  EXPECT_GE(found, 4) << approx.raw;  // the three paragraphs (in one chunk or more each) and the question
  EXPECT_EQ(found_tokens, p["approximate_tokens"].get<int64_t>() + 0) << approx.raw;

  // An exact request afterwards answers as a cold run does, bit for bit.
  const Reply exact = post(c, "/v1/chat/completions", story_body({2, 0, 1}, "s", "exact", -1));
  ASSERT_EQ(exact.status, 200) << exact.raw;
  EXPECT_FALSE(exact.body["promptcache"].contains("blocks")) << "only when asked, and only approximate";
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
