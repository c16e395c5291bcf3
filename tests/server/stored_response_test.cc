// The stored form of a /v1/responses response (server/chat/stored_response.h) and the
// in-memory store (response_store.h): values round-trip, every single-bit flip and
// every truncation is corruption, ids outside the vocabulary are corruption, another
// key's intact value is a miss; the store keeps tenants apart and evicts the least
// recently used response past its byte bound.
#include "server/chat/stored_response.h"

#include <gtest/gtest.h>

#include "server/chat/response_store.h"

namespace pc::server {
namespace {

StoredResponse sample() {
  StoredResponse s;
  s.response = {{"id", "resp_1"}, {"object", "response"}, {"output", nlohmann::json::array()}};
  s.messages = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "yo"}}});
  s.input = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
  s.reply_key = {{"text", "yo"}};
  RememberedReply r;
  r.ids = {5, 6};
  r.context = {1, 2, 3};
  r.kv_tokens = 4;
  s.reply = r;
  return s;
}

TEST(StoredResponse, RoundTrips) {
  const std::vector<uint8_t> v = encode_stored_response("t\x1fresp_1", sample());
  const DecodedStoredResponse d = decode_stored_response("t\x1fresp_1", v, 1000);
  ASSERT_EQ(d.status, StoredResponseStatus::kOk) << d.reason;
  EXPECT_EQ(d.value.response, sample().response);
  EXPECT_EQ(d.value.messages, sample().messages);
  EXPECT_EQ(d.value.input, sample().input);
  EXPECT_EQ(d.value.reply_key, sample().reply_key);
  ASSERT_TRUE(d.value.reply);
  EXPECT_EQ(d.value.reply->ids, sample().reply->ids);
  EXPECT_EQ(d.value.reply->context, sample().reply->context);
  EXPECT_EQ(decode_stored_response("u\x1fresp_1", v, 1000).status, StoredResponseStatus::kOtherKey);
  StoredResponse none = sample();
  none.reply.reset();
  none.reply_key = nullptr;
  const DecodedStoredResponse n = decode_stored_response("k", encode_stored_response("k", none), 1000);
  ASSERT_EQ(n.status, StoredResponseStatus::kOk) << n.reason;
  EXPECT_FALSE(n.value.reply);
}

TEST(StoredResponse, EverySingleBitFlipAndTruncationIsCorrupt) {
  const std::vector<uint8_t> v = encode_stored_response("k", sample());
  for (size_t bit = 0; bit < v.size() * 8; ++bit) {
    std::vector<uint8_t> f = v;
    f[bit / 8] ^= uint8_t(1u << (bit % 8));
    EXPECT_EQ(decode_stored_response("k", f, 1000).status, StoredResponseStatus::kCorrupt) << "bit " << bit;
  }
  for (size_t n = 0; n < v.size(); ++n)
    EXPECT_EQ(decode_stored_response("k", std::vector<uint8_t>(v.begin(), v.begin() + std::ptrdiff_t(n)), 1000).status,
              StoredResponseStatus::kCorrupt)
        << n << " bytes";
}

TEST(StoredResponse, IdsOutsideTheVocabularyAreCorrupt) {
  const std::vector<uint8_t> v = encode_stored_response("k", sample());
  EXPECT_EQ(decode_stored_response("k", v, 6).status, StoredResponseStatus::kCorrupt);
  EXPECT_EQ(decode_stored_response("k", v, 7).status, StoredResponseStatus::kOk);
}

TEST(ResponseStore, TenantsAreApartAndDeleteRemoves) {
  ResponseStore store;
  EXPECT_TRUE(store.put("alice", "resp_1", sample()));
  EXPECT_TRUE(store.get("alice", "resp_1"));
  EXPECT_FALSE(store.get("bob", "resp_1"));
  EXPECT_FALSE(store.erase("bob", "resp_1"));
  EXPECT_TRUE(store.get("alice", "resp_1"));
  EXPECT_TRUE(store.erase("alice", "resp_1"));
  EXPECT_FALSE(store.get("alice", "resp_1"));
  EXPECT_FALSE(store.erase("alice", "resp_1"));
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedPastItsBound) {
  const int64_t one = int64_t(stored_response_json(sample()).size()) + 40;  // + key and reply ids
  ResponseStore store(3 * one);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(store.put("t", id, sample()));
  ASSERT_TRUE(store.get("t", "a"));  // a is now the most recent: b goes first
  ASSERT_TRUE(store.put("t", "d", sample()));
  EXPECT_TRUE(store.get("t", "a"));
  EXPECT_FALSE(store.get("t", "b"));
  EXPECT_TRUE(store.get("t", "c"));
  EXPECT_TRUE(store.get("t", "d"));
  EXPECT_LE(store.stats().bytes, 3 * one);
}

}  // namespace
}  // namespace pc::server
