#include "tier/disk_tier.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/error.h"
#include "test_util.h"
#include "tier/tier_fixture.h"

namespace pc {
namespace {

namespace fs = std::filesystem;
using test::kv_image;
using test::small_ns;
using test::small_shape;

struct DiskTierTest : ::testing::Test {
  KvStorage kv{small_shape(), 32};
  std::string dir = test::temp_dir() + "/cache";
  DiskTierTest() {
    std::vector<int32_t> all;
    for (int32_t p = 0; p < 32; ++p) all.push_back(p);
    test::fill_pattern(kv, all, 5);
  }
  // An entry of tokens token_run(n, seed) over pages first_page, first_page + 1, ...
  std::vector<uint8_t> entry(int32_t n, int32_t seed = 100, int32_t first_page = 0) {
    std::vector<int32_t> pages;
    for (int32_t i = 0; i < (n + 15) / 16; ++i) pages.push_back(first_page + i);
    return serialize_entry(kv, pages, test::token_run(n, seed), small_ns());
  }
  // The chain links of `tokens` over pages first_page, first_page + 1, ...
  std::vector<std::vector<uint8_t>> chain(const std::vector<int32_t>& tokens, int32_t first_page = 0) {
    std::vector<int32_t> pages;
    for (int32_t i = 0; i < int32_t(tokens.size()) / 16; ++i) pages.push_back(first_page + i);
    return serialize_chain(kv, pages, tokens, small_ns());
  }
  std::string link_path(const std::vector<int32_t>& tokens, size_t link) const {
    return dir + "/" + key_hex(chain_links(small_ns(), small_shape(), tokens)[link].key) + ".kv";
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  static std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  }
  std::string path_for(int32_t n, int32_t seed = 100) const {
    return dir + "/" + key_hex(entry_key(small_ns(), small_shape(), test::token_run(n, seed))) + ".kv";
  }
};

TEST_F(DiskTierTest, RoundTripAndChainWalk) {
  DiskTier disk(dir, 1 << 20);
  const auto query = test::token_run(50);
  const auto links = chain(std::vector<int32_t>(query.begin(), query.begin() + 48));
  ASSERT_EQ(links.size(), 3u);
  for (const auto& l : links) ASSERT_EQ(disk.put(l), TierStatus::kOk);
  EXPECT_EQ(disk.put(links[1]), TierStatus::kOk);  // already there
  EXPECT_EQ(disk.stats().entries, 3);
  EXPECT_EQ(disk.stats().puts, 3);
  EXPECT_EQ(disk.stats().tokens, 48);
  int64_t link_bytes = 0;
  for (const auto& l : links) link_bytes += int64_t(l.size());
  EXPECT_EQ(disk.stats().bytes_written, link_bytes);

  TierChain r = disk.read_prefix(small_ns(), small_shape(), query);
  ASSERT_TRUE(r.hit()) << r.message;
  ASSERT_EQ(r.links.size(), 3u);
  EXPECT_EQ(r.tokens(), 48);
  EXPECT_EQ(disk.stats().bytes_read, link_bytes);
  std::vector<int32_t> out{20, 21, 22};
  for (size_t i = 0; i < 3; ++i) ASSERT_EQ(restore_entry(r.links[i], kv, std::span(out).subspan(i, 1)), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, out, 48), kv_image(kv, {0, 1, 2}, 48));

  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), std::span(query).first(47)).tokens(), 32);
  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), std::span(query).first(15)).status, TierStatus::kMiss);
  EXPECT_EQ(disk.read_prefix(small_ns("other"), small_shape(), query).status, TierStatus::kMiss);
  // A chain whose tokens differ after the first link stops after it.
  auto other = query;
  other[20] += 1;
  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), other).tokens(), 16);
  const auto keys = chain_links(small_ns(), small_shape(), query);
  const std::vector<uint64_t> ask{keys[0].key, keys[2].key, 12345};
  EXPECT_EQ(disk.has(ask), (std::vector<char>{1, 1, 0}));

  // Unchained entries (modules, blocks) are found by get().
  ASSERT_EQ(disk.put(entry(16, 7)), TierStatus::kOk);
  EXPECT_TRUE(disk.get(small_ns(), small_shape(), test::token_run(16, 7)).hit());
  EXPECT_FALSE(disk.get(small_ns(), small_shape(), test::token_run(17, 7)).hit());
  EXPECT_TRUE(disk.erase(small_ns(), small_shape(), test::token_run(16, 7)));
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 7)));
  EXPECT_FALSE(fs::exists(path_for(16, 7)));
  EXPECT_EQ(disk.put(std::vector<uint8_t>{1, 2, 3}), TierStatus::kInvalid);
}

TEST_F(DiskTierTest, SharedPrefixIsStoredOnce) {
  DiskTier disk(dir, 1 << 20);
  // Two conversations sharing their first 32 tokens (pages 0, 1), then apart.
  const auto a = test::token_run(64, 100);
  auto b = a;
  for (size_t i = 32; i < 64; ++i) b[i] = 5000 + int32_t(i);
  std::vector<int32_t> pages_b{0, 1, 10, 11};
  for (const auto& l : chain(a)) ASSERT_EQ(disk.put(l), TierStatus::kOk);
  for (const auto& l : serialize_chain(kv, pages_b, b, small_ns())) ASSERT_EQ(disk.put(l), TierStatus::kOk);
  EXPECT_EQ(disk.stats().entries, 6);  // 2 shared + 2 + 2, not 8
  EXPECT_EQ(disk.stats().puts, 6);
  EXPECT_EQ(files().size(), 7u);       // and .lock
  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), a).tokens(), 64);
  TierChain rb = disk.read_prefix(small_ns(), small_shape(), b);
  ASSERT_EQ(rb.tokens(), 64);
  std::vector<int32_t> out{20, 21, 22, 23};
  for (size_t i = 0; i < 4; ++i) ASSERT_EQ(restore_entry(rb.links[i], kv, std::span(out).subspan(i, 1)), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, out, 64), kv_image(kv, pages_b, 64));
}

TEST_F(DiskTierTest, MissingOrCorruptMiddleLinkStopsTheChain) {
  const auto t = test::token_run(64);
  {
    DiskTier disk(dir, 1 << 20);
    for (const auto& l : chain(t)) ASSERT_EQ(disk.put(l), TierStatus::kOk);
    ASSERT_TRUE(fs::remove(link_path(t, 1)));  // gone behind the tier's back
    TierChain r = disk.read_prefix(small_ns(), small_shape(), t);
    EXPECT_EQ(r.tokens(), 16);  // link 0 only: 2 and 3 are unreachable without 1
  }
  DiskTier disk(dir, 1 << 20);  // the restart forgets link 1
  EXPECT_EQ(disk.stats().entries, 3);
  ASSERT_EQ(disk.put(chain(t)[1]), TierStatus::kOk);  // written again: the tail is reachable again
  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), t).tokens(), 64);
  auto bytes = read_file(link_path(t, 2));
  bytes[bytes.size() - 5] ^= 4;  // a payload bit of link 2
  write_file(link_path(t, 2), bytes);
  TierChain r = disk.read_prefix(small_ns(), small_shape(), t);
  EXPECT_EQ(r.tokens(), 32);
  EXPECT_NE(r.message.find("checksum"), std::string::npos) << r.message;
  EXPECT_EQ(disk.stats().corrupt_deleted, 1);
  EXPECT_FALSE(fs::exists(link_path(t, 2)));
  EXPECT_TRUE(fs::exists(link_path(t, 3)));  // kept and counted: reachable once 2 is written again
  EXPECT_EQ(disk.stats().entries, 3);
}

TEST_F(DiskTierTest, EvictionTakesChainsFromTheTail) {
  const auto t = test::token_run(64);
  const auto links = chain(t);
  DiskTier disk(dir, 4 * links[0].size());
  for (const auto& l : links) ASSERT_EQ(disk.put(l), TierStatus::kOk);
  disk.touch_chain(std::vector<uint64_t>{});  // nothing to do
  std::vector<uint64_t> keys;
  for (const ChainLink& l : chain_links(small_ns(), small_shape(), t)) keys.push_back(l.key);
  disk.touch_chain(keys);
  // Two more entries: the chain's two last links go, its root stays reachable.
  ASSERT_EQ(disk.put(entry(16, 1, 8)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 2, 9)), TierStatus::kOk);
  EXPECT_EQ(disk.has(keys), (std::vector<char>{1, 1, 0, 0}));
  EXPECT_EQ(disk.read_prefix(small_ns(), small_shape(), t).tokens(), 32);
  // A read marks the chain used tail first, so the same holds after reads.
  ASSERT_EQ(disk.put(entry(16, 3, 10)), TierStatus::kOk);
  EXPECT_EQ(disk.has(keys), (std::vector<char>{1, 1, 0, 0}));  // the unchained seed 1 went
  ASSERT_EQ(disk.put(entry(16, 4, 11)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 5, 12)), TierStatus::kOk);
  EXPECT_EQ(disk.has(keys), (std::vector<char>{1, 0, 0, 0}));
}

TEST_F(DiskTierTest, LifetimeSurvivesRestart) {
  const int64_t t0 = int64_t(::time(nullptr));
  {
    DiskTier disk(dir, 1 << 20);
    ASSERT_EQ(disk.put(entry(16, 1), 3600), TierStatus::kOk);
    ASSERT_EQ(disk.put(entry(16, 2)), TierStatus::kOk);
    ASSERT_EQ(disk.put(entry(16, 2), 60), TierStatus::kOk);  // a stored entry gets a lifetime
  }
  {
    DiskTier disk(dir, 1 << 20);
    std::map<int64_t, int64_t> left;  // seed → seconds left
    for (const TierItem& it : disk.list()) {
      ASSERT_GT(it.keep_until, 0) << key_hex(it.key);
      left[it.key == entry_key(small_ns(), small_shape(), test::token_run(16, 1)) ? 1 : 2] = it.keep_until - t0;
    }
    EXPECT_NEAR(double(left[1]), 3600.0, 5.0);  // about an hour left after the restart
    EXPECT_NEAR(double(left[2]), 60.0, 5.0);
  }
  // A restart with room for one entry evicts neither: their lifetimes still hold.
  DiskTier disk(dir, entry(16, 1).size());
  EXPECT_EQ(disk.stats().entries, 2);
  EXPECT_EQ(disk.stats().counter("evicted"), 0);
  ASSERT_TRUE(disk.erase(small_ns(), small_shape(), test::token_run(16, 1)));
  EXPECT_FALSE(fs::exists(dir + "/" + key_hex(entry_key(small_ns(), small_shape(), test::token_run(16, 1))) + ".keep"));
}

TEST_F(DiskTierTest, RestartFindsEntriesInLruOrder) {
  {
    DiskTier disk(dir, 1 << 20);
    for (int32_t n : {16, 32, 48}) {  // apart in time: file times are only as fine as the kernel's tick
      ASSERT_EQ(disk.put(entry(n)), TierStatus::kOk);
      usleep(20000);
    }
    ASSERT_TRUE(disk.get(small_ns(), small_shape(), test::token_run(16)).hit());  // touched last
    EXPECT_THROW(DiskTier(dir, 1 << 20), Error);  // the directory is locked
  }
  DiskTier disk(dir, 1 << 20);
  const auto items = disk.list();
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].n_tokens, 16);
  EXPECT_EQ(items[1].n_tokens, 48);
  EXPECT_EQ(items[2].n_tokens, 32);
  EXPECT_EQ(items[0].ns, small_ns());
  TierLookup r = disk.get(small_ns(), small_shape(), test::token_run(32));
  ASSERT_TRUE(r.hit());
  EXPECT_EQ(r.length, 32);
  std::vector<int32_t> out{20, 21};
  ASSERT_EQ(restore_entry(r.entry, kv, out), EntryError::kOk);
  EXPECT_EQ(kv_image(kv, out, 32), kv_image(kv, {0, 1}, 32));
}

TEST_F(DiskTierTest, CorruptTruncatedAndForeignFilesAreDeleted) {
  {
    DiskTier disk(dir, 1 << 20);
    for (int32_t n : {16, 32, 48, 64}) ASSERT_EQ(disk.put(entry(n)), TierStatus::kOk);
  }
  // 16: payload byte flipped (found at get). 32: truncated. 48: header byte flipped.
  auto e16 = read_file(path_for(16));
  e16[e16.size() - 10] ^= 1;
  write_file(path_for(16), e16);
  auto e32 = read_file(path_for(32));
  e32.resize(e32.size() - 100);
  write_file(path_for(32), e32);
  auto e48 = read_file(path_for(48));
  e48[100] ^= 1;
  write_file(path_for(48), e48);
  // A valid entry under the wrong name, junk named like an entry, a crash's temp file,
  // and an unrelated file (left alone).
  write_file(path_for(80), read_file(path_for(64)));
  write_file(dir + "/0123456789abcdef.kv", {1, 2, 3});
  write_file(dir + "/." + key_hex(7) + ".1.part", std::vector<uint8_t>(500, 7));
  write_file(dir + "/notes.txt", {'h', 'i'});

  DiskTier disk(dir, 1 << 20);
  TierStats s = disk.stats();
  EXPECT_EQ(s.corrupt_deleted, 4);  // 32, 48, the misnamed one, the junk
  EXPECT_EQ(s.counter("temp_removed"), 1);
  EXPECT_EQ(s.entries, 2);
  std::vector<std::string> want{".lock", fs::path(path_for(16)).filename().string(),
                                fs::path(path_for(64)).filename().string(), "notes.txt"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(files(), want);

  TierLookup r = disk.get(small_ns(), small_shape(), test::token_run(16));
  EXPECT_EQ(r.status, TierStatus::kMiss);
  EXPECT_NE(r.message.find("checksum"), std::string::npos) << r.message;
  EXPECT_FALSE(fs::exists(path_for(16)));
  EXPECT_EQ(disk.stats().corrupt_deleted, 5);
  EXPECT_TRUE(disk.get(small_ns(), small_shape(), test::token_run(64)).hit());
}

TEST_F(DiskTierTest, CapacityEvictsLeastRecentlyUsed) {
  const uint64_t one = entry(16, 1).size();
  DiskTier disk(dir, 3 * one);
  ASSERT_EQ(disk.put(entry(16, 1)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 2)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 3)), TierStatus::kOk);
  ASSERT_TRUE(disk.get(small_ns(), small_shape(), test::token_run(16, 1)).hit());
  ASSERT_EQ(disk.put(entry(16, 4)), TierStatus::kOk);  // evicts seed 2
  const auto items = disk.list();
  ASSERT_EQ(items.size(), 3u);
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 2)));
  EXPECT_FALSE(fs::exists(path_for(16, 2)));
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 1)));
  EXPECT_EQ(disk.stats().counter("evicted"), 1);
  EXPECT_EQ(disk.stats().bytes, int64_t(3 * one));
  // A two-page entry evicts the two least recently used (3 then 1).
  ASSERT_EQ(disk.put(entry(32, 5)), TierStatus::kOk);
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 3)));
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 1)));
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 4)));
  EXPECT_EQ(disk.put(entry(64, 6)), TierStatus::kTooLarge);
  EXPECT_LE(disk.stats().bytes, int64_t(3 * one));
}

// An entry put with a lifetime is not evicted for capacity before it runs out; when
// such entries fill the capacity, a put is refused rather than evicting them.
TEST_F(DiskTierTest, LifetimesKeepEntriesFromCapacityEviction) {
  const uint64_t one = entry(16, 1).size();
  DiskTier disk(dir, 2 * one);
  const int64_t now = int64_t(std::time(nullptr));
  ASSERT_EQ(disk.put(entry(16, 1), 3600), TierStatus::kOk);  // the oldest, kept an hour
  ASSERT_EQ(disk.put(entry(16, 2)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 3)), TierStatus::kOk);  // evicts seed 2, not the kept seed 1
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 1)));
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 2)));
  std::vector<int64_t> ends;
  for (const TierItem& it : disk.list())
    if (it.keep_until != 0) ends.push_back(it.keep_until);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_GE(ends[0], now + 3600);
  EXPECT_LE(ends[0], now + 3601);
  // Putting an entry again keeps the later end.
  ASSERT_EQ(disk.put(entry(16, 3), 7200), TierStatus::kOk);
  int64_t kept = 0;
  for (const TierItem& it : disk.list()) kept += it.keep_until > 0;
  EXPECT_EQ(kept, 2);
  // Both kept: nothing may go, so the next put is refused.
  EXPECT_EQ(disk.put(entry(16, 4)), TierStatus::kNoSpace);
  EXPECT_EQ(disk.stats().counter("evicted"), 1);
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 1)));
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 3)));
}

TEST_F(DiskTierTest, RestartWithSmallerCapacityTrims) {
  const uint64_t one = entry(16, 1).size();
  {
    DiskTier disk(dir, 10 * one);
    for (int32_t seed = 1; seed <= 4; ++seed) {
      ASSERT_EQ(disk.put(entry(16, seed)), TierStatus::kOk);
      usleep(10000);  // distinct mtimes
    }
  }
  DiskTier disk(dir, 2 * one);
  EXPECT_EQ(disk.stats().entries, 2);
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 4)));
  EXPECT_TRUE(disk.contains(small_ns(), small_shape(), test::token_run(16, 3)));
}

TEST_F(DiskTierTest, FullDiskEvictsAndRetriesOnce) {
  int fail_next = 0;
  DiskTierOptions opt;
  opt.capacity_bytes = 1 << 20;
  opt.inject_write_error = [&](uint64_t) { return fail_next-- > 0 ? ENOSPC : 0; };
  DiskTier disk(dir, opt);
  ASSERT_EQ(disk.put(entry(16, 1)), TierStatus::kOk);
  ASSERT_EQ(disk.put(entry(16, 2)), TierStatus::kOk);
  fail_next = 1;  // the first write fails, the retry after eviction succeeds
  ASSERT_EQ(disk.put(entry(16, 3)), TierStatus::kOk);
  EXPECT_EQ(disk.stats().counter("enospc_retries"), 1);
  EXPECT_EQ(disk.stats().counter("evicted"), 1);
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 1)));
  fail_next = 2;  // both fail: nothing stored, nothing thrown, no temp file left
  EXPECT_EQ(disk.put(entry(16, 4)), TierStatus::kNoSpace);
  EXPECT_EQ(disk.stats().put_failures, 1);
  EXPECT_FALSE(disk.contains(small_ns(), small_shape(), test::token_run(16, 4)));
  for (const auto& f : files()) EXPECT_EQ(f.find(".part"), std::string::npos) << f;
  fail_next = 0;
  EXPECT_EQ(disk.put(entry(16, 4)), TierStatus::kOk);
}

TEST_F(DiskTierTest, UnusablePathsAreErrorsNotCrashes) {
  const std::string file = test::temp_dir() + "/plain";
  write_file(file, {1});
  EXPECT_THROW(DiskTier(file + "/cache", 1 << 20), Error);
  DiskTier disk(dir, 1 << 20);
  ASSERT_EQ(disk.put(entry(16, 1)), TierStatus::kOk);
  fs::remove_all(dir);  // the directory vanishes under us
  EXPECT_EQ(disk.put(entry(16, 2)), TierStatus::kIoError);
  EXPECT_EQ(disk.get(small_ns(), small_shape(), test::token_run(16, 1)).status, TierStatus::kMiss);
  EXPECT_GE(disk.stats().counter("io_errors"), 1);
}

}  // namespace
}  // namespace pc
