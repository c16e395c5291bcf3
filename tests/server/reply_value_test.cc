// The stored form of a remembered reply (server/chat/reply_value.h): every single-bit flip
// of a value is caught, ids outside the vocabulary are corruption, another key's
// intact value is a miss and not corruption.
#include "server/chat/reply_value.h"

#include <gtest/gtest.h>

namespace pc::server {
namespace {

RememberedReply sample() {
  RememberedReply r;
  r.ids = {5, 6, 7, 300};
  r.tail = "!";
  r.context = {1, 2, 3, 4, 999};
  r.kv_tokens = 8;
  return r;
}

TEST(ReplyValue, RoundTrips) {
  const std::vector<uint8_t> v = encode_reply("k1", sample());
  const DecodedReply d = decode_reply_value("k1", v, 1000);
  ASSERT_EQ(d.status, ReplyValueStatus::kOk) << d.reason;
  EXPECT_EQ(d.reply.ids, sample().ids);
  EXPECT_EQ(d.reply.tail, "!");
  EXPECT_EQ(d.reply.context, sample().context);
  EXPECT_EQ(d.reply.kv_tokens, 8);
  EXPECT_EQ(decode_reply_value("k2", v, 1000).status, ReplyValueStatus::kOtherKey);
}

TEST(ReplyValue, EverySingleBitFlipIsCorrupt) {
  const std::vector<uint8_t> v = encode_reply("k1", sample());
  for (size_t bit = 0; bit < v.size() * 8; ++bit) {
    std::vector<uint8_t> f = v;
    f[bit / 8] ^= uint8_t(1u << (bit % 8));
    EXPECT_EQ(decode_reply_value("k1", f, 1000).status, ReplyValueStatus::kCorrupt) << "bit " << bit;
  }
  for (size_t n = 0; n < v.size(); ++n)
    EXPECT_EQ(decode_reply_value("k1", std::vector<uint8_t>(v.begin(), v.begin() + n), 1000).status,
              ReplyValueStatus::kCorrupt)
        << n;
}

TEST(ReplyValue, IdsOutsideTheVocabularyAreCorrupt) {
  const std::vector<uint8_t> v = encode_reply("k1", sample());
  EXPECT_EQ(decode_reply_value("k1", v, 999).status, ReplyValueStatus::kCorrupt);  // context holds 999
  EXPECT_EQ(decode_reply_value("k1", v, 1000).status, ReplyValueStatus::kOk);
  RememberedReply r = sample();
  r.ids.push_back(-1);
  EXPECT_EQ(decode_reply_value("k1", encode_reply("k1", r), 1000).status, ReplyValueStatus::kCorrupt);
}

TEST(ReplyValue, BoundCoversAFullContext) {
  RememberedReply r;
  r.ids.assign(100, 1);
  r.context.assign(400, 2);
  r.tail = std::string(100, 't');
  EXPECT_LE(encode_reply("key", r).size(), reply_value_max_bytes("key", 500));
}

}  // namespace
}  // namespace pc::server
