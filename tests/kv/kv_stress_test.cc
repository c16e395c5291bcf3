// Randomized stress test of pool + page tables + radix index, run the way the engine
// runs them, on a real (tiny) KvStorage. The fake forward pass writes into each slot
// a hash of (namespace, token prefix) and the position; every cached token a
// sequence reuses must hold exactly the hash of its own prefix. After every step:
//  - pool and index invariants (counters, free list, alignment, lock sums);
//  - sequence references per page == references the live tables hold;
//  - cache references per page == slices the index holds;
//  - bytes in use + cached + free == capacity;
//  - every live table reads back its own tokens' KV (no shared slot overwritten);
//  - locked match nodes are alive.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kv_fixture.h"

namespace pc {
namespace {

const KvShape kShape{1, 1, 2, 4};  // head_dim 2: one 64-bit hash per slot in K and V

uint64_t mix(uint64_t h, int32_t token) {
  h ^= uint64_t(uint32_t(token)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

struct Live {
  int ns = 0;
  std::vector<int32_t> tokens;  // tokens whose KV is in the table
  PrefixMatch match;
  PageTable table;
};

class Stress {
 public:
  Stress(int32_t n_pages, uint32_t seed)
      : storage_(kShape, n_pages), pool_(storage_), index_(pool_), rng_(seed) {
    pool_.set_reclaimer(&index_);
  }
  void run(int steps);

 private:
  int pick(int n) { return int(rng_() % uint32_t(n)); }
  uint64_t prefix_hash(int ns, const std::vector<int32_t>& tokens, int32_t t) const;
  void write(Live& s, int32_t first);
  void verify(const Live& s) const;
  void check() const;
  std::vector<int32_t> make_prompt();
  void start();
  void decode();
  void finish(bool insert);
  void pin();
  void unpin();

  KvStorage storage_;
  PagePool pool_;
  RadixIndex index_;
  std::mt19937 rng_;
  const KvNamespace ns_[2] = {{"m", "f16", ""}, {"m", "f16", "salt"}};
  std::vector<Live> live_;
  std::vector<std::pair<int, std::vector<int32_t>>> history_;  // finished sequences
  std::vector<std::pair<int, std::vector<int32_t>>> pins_;
};

uint64_t Stress::prefix_hash(int ns, const std::vector<int32_t>& tokens, int32_t t) const {
  uint64_t h = 1469598103934665603ull + uint64_t(ns);
  for (int32_t i = 0; i <= t; ++i) h = mix(h, tokens[i]);
  return h;
}

// The fake forward pass: KV of tokens [first, n_tokens) into the appended slots.
void Stress::write(Live& s, int32_t first) {
  const std::span<const SlotRef> slots = s.table.appended();
  for (size_t i = 0; i < slots.size(); ++i) {
    const int32_t t = first + int32_t(i);
    const uint64_t h = prefix_hash(s.ns, s.tokens, t);
    uint16_t* k = storage_.k(slots[i].page, 0);  // (kernels/k_layout.h)
    uint16_t* v = storage_.v(slots[i].page, 0) + slots[i].slot * 2;
    k[k_index(4, 2, slots[i].slot, 0)] = uint16_t(h), k[k_index(4, 2, slots[i].slot, 1)] = uint16_t(h >> 16);
    v[0] = uint16_t(h >> 32), v[1] = uint16_t(h >> 48);
    storage_.pos(slots[i].page)[slots[i].slot] = t;
  }
}

void Stress::verify(const Live& s) const {
  const std::span<const PageEntry> e = s.table.entries();
  for (int32_t t = 0; t < s.table.n_tokens(); ++t) {
    const int32_t page = e[t / 4].page, slot = t % 4;
    const uint64_t h = prefix_hash(s.ns, s.tokens, t);
    const uint16_t* k = storage_.k(page, 0);
    const uint16_t* v = storage_.v(page, 0) + slot * 2;
    ASSERT_EQ(storage_.pos(page)[slot], t);
    ASSERT_EQ(k[k_index(4, 2, slot, 0)] | uint64_t(k[k_index(4, 2, slot, 1)]) << 16 | uint64_t(v[0]) << 32 |
                  uint64_t(v[1]) << 48,
              h)
        << "token " << t << " page " << page << " slot " << slot;
  }
}

void Stress::check() const {
  pool_.check_invariants();
  index_.check_invariants();
  test::expect_accounting_adds_up(pool_);
  std::vector<int32_t> seq(pool_.n_pages(), 0), cache;
  for (const Live& s : live_) {
    for (const PageEntry& e : s.table.entries()) ++seq[e.page];
    verify(s);
    if (s.match.node >= 0) {
      ASSERT_GE(index_.node(s.match.node).lock_ref, 1);
    }
  }
  index_.count_page_refs(cache);
  for (int32_t p = 0; p < pool_.n_pages(); ++p) {
    ASSERT_EQ(pool_.seq_refs(p), seq[p]) << "page " << p;
    ASSERT_EQ(pool_.cache_refs(p), cache[p]) << "page " << p;
  }
}

// Mostly a prefix of an earlier sequence plus a few tokens, from a 3-token vocabulary,
// so that prefixes are shared, split and diverge mid-page all the time.
std::vector<int32_t> Stress::make_prompt() {
  std::vector<int32_t> p;
  if (!history_.empty() && pick(10) < 7) {
    const int recent = std::min<int>(8, int(history_.size()));  // likely still cached
    const auto& h = history_[history_.size() - 1 - pick(recent)].second;
    const int n = int(h.size());
    p.assign(h.begin(), h.begin() + n / 2 + pick(n - n / 2 + 1));  // long shared prefixes
  }
  const int extra = 1 + pick(8);
  for (int i = 0; i < extra; ++i) p.push_back(1 + pick(3));
  return p;
}

void Stress::start() {
  Live s{pick(2), make_prompt(), {}, PageTable(pool_)};
  s.match = index_.match_prefix(ns_[s.ns], s.tokens, int32_t(s.tokens.size()) - 1);
  ASSERT_LT(s.match.length, int32_t(s.tokens.size()));
  index_.lock(s.match.node);
  s.table = PageTable::from_slices(pool_, s.match.slices);
  ASSERT_EQ(s.table.n_tokens(), s.match.length);
  const int32_t first = s.table.n_tokens();
  if (!s.table.prepare_append(int32_t(s.tokens.size()) - first)) {
    ASSERT_EQ(s.table.n_tokens(), first);  // unchanged on failure
    s.table.release();
    index_.unlock(s.match.node);
    return;
  }
  write(s, first);
  live_.push_back(std::move(s));
}

void Stress::decode() {
  Live& s = live_[pick(int(live_.size()))];
  const int n = 1 + pick(3);
  const int32_t first = s.table.n_tokens();
  if (!s.table.prepare_append(n)) {
    ASSERT_EQ(s.table.n_tokens(), first);
    return;
  }
  for (int i = 0; i < n; ++i) s.tokens.push_back(1 + pick(3));
  write(s, first);
}

void Stress::finish(bool insert) {
  const int i = pick(int(live_.size()));
  Live& s = live_[i];
  if (insert) {
    index_.insert(ns_[s.ns], s.tokens, s.table);
    history_.emplace_back(s.ns, s.tokens);
  }
  s.table.release();
  index_.unlock(s.match.node);
  live_.erase(live_.begin() + i);
}

void Stress::pin() {
  if (history_.empty()) return;
  auto [ns, t] = history_[pick(int(history_.size()))];
  t.resize(1 + pick(int(t.size())));
  if (index_.pin(ns_[ns], t)) pins_.emplace_back(ns, t);
}

void Stress::unpin() {
  if (pins_.empty()) return;
  const int i = pick(int(pins_.size()));
  ASSERT_TRUE(index_.unpin(ns_[pins_[i].first], pins_[i].second));
  pins_.erase(pins_.begin() + i);
}

void Stress::run(int steps) {
  for (int step = 0; step < steps; ++step) {
    const int op = pick(100);
    if (op < 30) {
      if (live_.size() < 3) start();
    } else if (live_.empty()) {
      continue;
    } else if (op < 60) {
      decode();
    } else if (op < 80) {
      finish(/*insert=*/true);
    } else if (op < 85) {
      finish(/*insert=*/false);
    }
    if (op >= 85 && op < 92) pin();
    if (op >= 92 && op < 98) unpin();
    if (op >= 98) index_.evict(size_t(pick(10)) * pool_.page_bytes());
    ASSERT_NO_FATAL_FAILURE(check()) << "step " << step;
  }
  while (!pins_.empty()) unpin();
  while (!live_.empty()) finish(true);
  ASSERT_NO_FATAL_FAILURE(check());
  const RadixStats st = index_.stats();
  EXPECT_GT(st.hits, 100);
  EXPECT_GT(st.evicted, 10);
  index_.evict(SIZE_MAX);
  EXPECT_EQ(index_.stats().entries, 0);
  EXPECT_EQ(index_.stats().bytes, 0);
  EXPECT_EQ(pool_.n_free(), pool_.n_pages());
  pool_.check_invariants();
}

TEST(KvStress, RandomRequestsKeepEveryInvariant) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    Stress s(/*n_pages=*/seed % 2 ? 16 : 40, seed);
    s.run(3000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace pc
