#include "tier/entry.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tier/entry_key.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

using test::kv_image;
using test::small_ns;
using test::small_shape;

struct EntryTest : ::testing::Test {
  KvStorage kv{small_shape(), 16};
  std::vector<int32_t> src{3, 7, 1};  // deliberately not in order
  std::vector<int32_t> dst{10, 4, 12};
  void SetUp() override { test::fill_pattern(kv, src, 42, 1000); }
  EntryExpect expect() const { return EntryExpect{"model-abc", "f16", small_shape()}; }
};

TEST_F(EntryTest, RoundTripIsBitwise) {
  for (bool compress : {false, true}) {
    for (int32_t n : {48, 37, 1, 16}) {
      const auto tokens = test::token_run(n);
      std::vector<int32_t> pages(src.begin(), src.begin() + (n + 15) / 16);
      auto bytes = serialize_entry(kv, pages, tokens, small_ns("t1"), {compress, 1});
      Decoded<Entry> d = deserialize_entry(bytes, expect());
      ASSERT_TRUE(d.ok()) << d.message;
      EXPECT_EQ(d.value.info.tokens, tokens);
      EXPECT_EQ(d.value.info.ns, small_ns("t1"));
      if (!compress) {
        EXPECT_FALSE(d.value.info.compressed);  // (random data may stay raw even when asked)
      }
      std::vector<int32_t> out(dst.begin(), dst.begin() + pages.size());
      ASSERT_EQ(restore_entry(d.value, kv, out), EntryError::kOk);
      EXPECT_EQ(kv_image(kv, out, n), kv_image(kv, pages, n)) << "n=" << n << " compress=" << compress;
      EXPECT_EQ(kv.pos(out.back())[(n - 1) % 16], 1000 + n - 1);
      if (n % 16) {
        EXPECT_EQ(kv.pos(out.back())[n % 16], -1);
      }
    }
  }
}

TEST_F(EntryTest, SlotsBeyondTheTokensDoNotMatter) {
  const auto tokens = test::token_run(20);  // page 7 holds tokens 16-19 in slots 0-3
  const auto a = serialize_entry(kv, std::vector<int32_t>{3, 7}, tokens, small_ns());
  test::fill_pattern(kv, {9}, 7, 0);
  kv.copy_slots(9, 7, 4);  // page 9: slots 0-3 as page 7, slots 4-15 different
  const auto b = serialize_entry(kv, std::vector<int32_t>{3, 9}, tokens, small_ns());
  EXPECT_EQ(a, b);
}

TEST_F(EntryTest, CompressionShrinksRedundantPayload) {
  KvStorage z(small_shape(), 4);  // all zeros
  const auto tokens = test::token_run(64);
  auto raw = serialize_entry(z, std::vector<int32_t>{0, 1, 2, 3}, tokens, small_ns());
  auto comp = serialize_entry(z, std::vector<int32_t>{0, 1, 2, 3}, tokens, small_ns(), {true, 3});
  EXPECT_LT(comp.size(), raw.size() / 4);
  Decoded<Entry> d = deserialize_entry(comp, {});
  ASSERT_TRUE(d.ok()) << d.message;
  EXPECT_TRUE(d.value.info.compressed);
  EXPECT_EQ(d.value.payload().size(), 4 * small_shape().bytes_per_page());
  ASSERT_EQ(restore_entry(d.value, kv, std::vector<int32_t>{8, 9, 10, 11}), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, {8, 9, 10, 11}, 64), kv_image(z, {0, 1, 2, 3}, 64));
}

TEST_F(EntryTest, EveryCorruptedByteIsRejected) {
  const auto tokens = test::token_run(20);
  for (bool compress : {false, true}) {
    const auto good = serialize_entry(kv, {src.data(), 2}, tokens, small_ns(), {compress, 1});
    for (size_t i = 0; i < good.size(); ++i) {
      auto bad = good;
      bad[i] ^= 0x20;
      Decoded<Entry> d = deserialize_entry(bad, expect());
      EXPECT_FALSE(d.ok()) << "flipped byte " << i << " of " << good.size();
      EXPECT_FALSE(d.message.empty());
    }
  }
}

TEST_F(EntryTest, EveryTruncationIsRejected) {
  const auto tokens = test::token_run(33);
  const auto good = serialize_entry(kv, src, tokens, small_ns());
  for (size_t n = 0; n < good.size(); n += (n < 200 ? 1 : 97)) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    Decoded<Entry> d = deserialize_entry(cut, expect());
    EXPECT_FALSE(d.ok()) << n;
    if (n >= 8 && n < good.size()) {
      EXPECT_EQ(d.error, EntryError::kTruncated) << n << ": " << d.message;
    }
  }
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(deserialize_entry(longer, expect()).error, EntryError::kCorrupt);
}

TEST_F(EntryTest, WrongModelTypeShapeMagicVersion) {
  const auto tokens = test::token_run(16);
  const auto good = serialize_entry(kv, {src.data(), 1}, tokens, small_ns());
  EXPECT_EQ(deserialize_entry(good, {"other-model", "f16", small_shape()}).error, EntryError::kWrongModel);
  EXPECT_EQ(deserialize_entry(good, {"model-abc", "q8_0", small_shape()}).error, EntryError::kWrongKvType);
  EXPECT_EQ(deserialize_entry(good, {"model-abc", "f16", KvShape{2, 2, 16, 16}}).error, EntryError::kWrongShape);
  EXPECT_EQ(deserialize_entry(good, {"model-abc", "f16", KvShape{2, 2, 8, 32}}).error, EntryError::kWrongShape);
  auto magic = good;
  magic[0] = 'X';
  EXPECT_EQ(deserialize_entry(magic, {}).error, EntryError::kBadMagic);
  auto version = good;
  version[8] = uint8_t(kEntryVersion + 1);
  EXPECT_EQ(deserialize_entry(version, {}).error, EntryError::kBadVersion);
  EXPECT_EQ(deserialize_entry({}, {}).error, EntryError::kTruncated);
  // Restoring into storage of another shape is refused.
  Decoded<Entry> d = deserialize_entry(good, {});
  ASSERT_TRUE(d.ok());
  KvStorage other(KvShape{2, 2, 16, 16}, 2);
  EXPECT_EQ(restore_entry(d.value, other, std::vector<int32_t>{0}), EntryError::kWrongShape);
  EXPECT_EQ(restore_entry(d.value, kv, std::vector<int32_t>{0, 1}), EntryError::kCorrupt);
}

TEST_F(EntryTest, HeaderParsesWithoutPayload) {
  const auto tokens = test::token_run(40);
  const auto good = serialize_entry(kv, src, tokens, small_ns("x"));
  const uint32_t hb = entry_header_bytes(std::span(good).first(kEntryFixedHeader));
  ASSERT_GT(hb, kEntryFixedHeader);
  Decoded<EntryInfo> h = parse_entry_header(std::span(good).first(hb), good.size());
  ASSERT_TRUE(h.ok()) << h.message;
  EXPECT_EQ(h.value.tokens, tokens);
  EXPECT_EQ(h.value.n_pages(), 3);
  EXPECT_EQ(h.value.total_bytes(), good.size());
  EXPECT_EQ(parse_entry_header(std::span(good).first(hb), good.size() - 1).error, EntryError::kTruncated);
}

TEST_F(EntryTest, LinksCarryTheirPlaceAndOldFormatsAreRejected) {
  const auto tokens = test::token_run(48);
  const auto chain = serialize_chain(kv, src, tokens, small_ns());
  ASSERT_EQ(chain.size(), 3u);
  const auto links = chain_links(small_ns(), small_shape(), tokens);
  for (size_t i = 0; i < 3; ++i) {
    Decoded<Entry> d = deserialize_entry(chain[i], EntryExpect{"model-abc", "f16", small_shape()});
    ASSERT_TRUE(d.ok()) << d.message;
    EXPECT_EQ(d.value.info.link.start, links[i].start);
    EXPECT_EQ(d.value.info.link.parent, links[i].parent);
    EXPECT_EQ(d.value.info.key(), links[i].key);
    EXPECT_TRUE(d.value.info.is(small_ns(), LinkPos{links[i].start, links[i].parent},
                                std::span(tokens).subspan(size_t(links[i].start), 16)));
    EXPECT_FALSE(d.value.info.is(small_ns(), LinkPos{links[i].start + 16, links[i].parent},
                                 std::span(tokens).subspan(size_t(links[i].start), 16)));
  }
  // A version 3 entry (the whole-prefix format before chains) is a counted miss, not a crash.
  auto old = chain[1];
  old[8] = 3;
  Decoded<Entry> d = deserialize_entry(old, {});
  EXPECT_EQ(d.error, EntryError::kBadVersion);
  EXPECT_NE(d.message.find("version 3"), std::string::npos) << d.message;
}

TEST_F(EntryTest, PreconditionsThrow) {
  const auto tokens = test::token_run(20);
  EXPECT_THROW(serialize_entry(kv, {src.data(), 1}, tokens, small_ns()), std::invalid_argument);
  EXPECT_THROW(serialize_entry(kv, std::vector<int32_t>{0, 99}, tokens, small_ns()), std::invalid_argument);
  EXPECT_THROW(serialize_entry(kv, {}, {}, small_ns()), std::invalid_argument);
}

// A state entry: the link-shaped page ending at its position, then the state.
TEST_F(EntryTest, StateEntryRoundTripsAndEveryCorruptedByteIsRejected) {
  const auto tokens = test::token_run(21);  // state after 21 tokens: own tokens [16, 21)
  const std::vector<ChainHash> bounds = chain_bounds(small_ns("t1"), small_shape(), tokens);
  ASSERT_EQ(bounds.size(), 2u);
  EXPECT_EQ(state_link_start(21, 16), 16);
  EXPECT_EQ(state_link_start(16, 16), 0);  // a page-aligned state: the whole last page
  const LinkPos link{16, bounds[1]};
  const auto own = std::span(tokens).subspan(16);
  std::vector<float> state(37);
  for (size_t i = 0; i < state.size(); ++i) state[i] = float(i) * 0.25f - 3.f;
  const auto bytes = serialize_state_link(kv, src[1], own, small_ns("t1"), link, state);
  Decoded<Entry> d = deserialize_entry(bytes, expect());
  ASSERT_TRUE(d.ok()) << d.message;
  EXPECT_TRUE(d.value.info.has_state());
  EXPECT_EQ(d.value.info.state_bytes, state.size() * sizeof(float));
  EXPECT_TRUE(d.value.info.is(small_ns("t1"), link, own));
  ASSERT_EQ(d.value.state_payload().size(), state.size() * sizeof(float));
  EXPECT_EQ(0, std::memcmp(d.value.state_payload().data(), state.data(), d.value.state_payload().size()));
  // Keyed apart from the link of the same tokens, and by the tenant.
  EXPECT_EQ(d.value.info.key(), state_key(small_ns("t1"), small_shape(), link.parent, own));
  EXPECT_NE(d.value.info.key(), link_key(small_ns("t1"), small_shape(), link.parent, own));
  EXPECT_NE(d.value.info.key(), state_key(small_ns("t2"), small_shape(), link.parent, own));
  std::vector<int32_t> out{dst[0]};
  ASSERT_EQ(restore_entry(d.value, kv, out), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, out, 5), kv_image(kv, {src[1]}, 5));
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x10;
    EXPECT_FALSE(deserialize_entry(bad, expect()).ok()) << "flipped byte " << i << " of " << bytes.size();
  }
  auto cut = bytes;
  cut.resize(bytes.size() - 4);
  EXPECT_FALSE(deserialize_entry(cut, expect()).ok());
}

TEST(EntryKey, ChainLinksAreThePagesKeyedByEverythingBefore) {
  const auto tokens = test::token_run(37);
  const auto links = chain_links(small_ns(), small_shape(), tokens);
  ASSERT_EQ(links.size(), 2u);  // whole pages only
  EXPECT_EQ(links[0].start, 0);
  EXPECT_EQ(links[1].start, 16);
  EXPECT_EQ(links[0].parent, ChainHash{});
  EXPECT_EQ(links[0].key, entry_key(small_ns(), small_shape(), std::span(tokens).first(16)));
  const ChainHash h0 = chain_next(small_ns(), small_shape(), ChainHash{}, std::span(tokens).first(16));
  EXPECT_EQ(links[1].parent, h0);
  EXPECT_EQ(links[1].key, link_key(small_ns(), small_shape(), h0, std::span(tokens).subspan(16, 16)));
  // The same page after other tokens is another link.
  auto other = tokens;
  other[3] += 1;
  EXPECT_NE(chain_links(small_ns(), small_shape(), other)[1].key, links[1].key);
  EXPECT_EQ(chain_links(small_ns(), small_shape(), std::span(tokens).first(32))[1].key, links[1].key);
  // The tenant is in every link's key, not only the root's.
  EXPECT_NE(chain_links(small_ns("t"), small_shape(), tokens)[1].key, links[1].key);
  EXPECT_NE(link_key(small_ns("t"), small_shape(), h0, std::span(tokens).subspan(16, 16)), links[1].key);
  // Namespace, tenant and shape all separate keys.
  const uint64_t k = entry_key(small_ns(), small_shape(), tokens);
  EXPECT_NE(k, entry_key(small_ns("t"), small_shape(), tokens));
  EXPECT_NE(k, entry_key(KvNamespace{"model-abd", "f16", ""}, small_shape(), tokens));
  // The scope's salt and the kind are part of the key too.
  const KvNamespace base = small_ns();
  for (const KvNamespace& other : {KvNamespace{base.model, base.kv_type, CacheScope("", "s")},
                                   base.as(KvKind::kBlock), base.as(KvKind::kApproximate),
                                   base.module_segment(1, 0), base.module_segment(1, 1)})
    EXPECT_NE(k, entry_key(other, small_shape(), tokens)) << to_string(other.kind);
  EXPECT_NE(entry_key(base.module_segment(1, 0), small_shape(), tokens),
            entry_key(base.module_segment(1, 1), small_shape(), tokens));
  EXPECT_NE(k, entry_key(small_ns(), KvShape{2, 2, 8, 32}, tokens));
  uint64_t back = 0;
  ASSERT_TRUE(parse_key_hex(key_hex(k), &back));
  EXPECT_EQ(back, k);
  EXPECT_FALSE(parse_key_hex("xyz", &back));
}

}  // namespace
}  // namespace pc
