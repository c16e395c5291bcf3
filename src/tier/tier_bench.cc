#include "tier/tier_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>

#include "tier/disk_tier.h"
#include "tier/entry.h"
#include "tier/redis_tier.h"

namespace pc {

namespace {

double best_of(int repeats, const std::function<void()>& f) {
  double best = 1e30;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("bench tiers: " + what);
}

// Restores a whole chain's links into consecutive pages of dst.
void restore_chain_into(const TierChain& c, KvStorage& kv, std::span<const int32_t> dst, const std::string& what) {
  check(c.hit() && c.links.size() == dst.size(), what + ": " + c.message);
  for (size_t i = 0; i < c.links.size(); ++i)
    check(restore_entry(c.links[i], kv, dst.subspan(i, 1)) == EntryError::kOk, what + " restore");
}

}  // namespace

std::vector<TierBenchRow> run_tier_bench(const TierBenchOptions& opt) {
  const KvShape& s = opt.shape;
  const int32_t n_pages = (opt.n_tokens + s.page_size - 1) / s.page_size;
  KvStorage kv(s, 2 * n_pages);  // source pages [0, n), restore targets [n, 2n)
  std::vector<int32_t> src(n_pages), dst(n_pages);
  for (int32_t i = 0; i < n_pages; ++i) src[i] = i, dst[i] = n_pages + i;
  uint32_t x = 12345;  // F16 bit patterns of small values: KV-like, hardly compressible
  for (int32_t p : src) {
    uint16_t* d = kv.k(p, 0);
    for (size_t j = 0; j < s.bytes_per_page() / 2; ++j) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      d[j] = uint16_t(0x2000 + (x & 0x3fff)) ^ uint16_t(x & 0x8000);
    }
    for (int slot = 0; slot < s.page_size; ++slot) kv.pos(p)[slot] = p * s.page_size + slot;
  }
  std::vector<int32_t> tokens(opt.n_tokens);
  for (int32_t i = 0; i < opt.n_tokens; ++i) tokens[i] = 1000 + i;
  const KvNamespace ns{"bench-model", "f16", ""};
  const uint64_t kv_bytes = uint64_t(n_pages) * s.bytes_per_page();
  std::vector<TierBenchRow> rows;
  auto row = [&](const std::string& name, const std::function<void()>& f) {
    rows.push_back({name, kv_bytes, best_of(opt.repeats, f)});
  };

  // Chains hold whole pages only: the links cover the first n_tokens / page_size pages.
  const std::span<const int32_t> full_pages = std::span<const int32_t>(dst).first(size_t(opt.n_tokens / s.page_size));
  std::vector<uint8_t> copy(kv_bytes);
  row("memcpy", [&] { std::memcpy(copy.data(), kv.k(0, 0), kv_bytes); });
  row("memcpy into a fresh buffer", [&] {  // what every new 92 MB vector pays in page faults
    std::vector<uint8_t> fresh(kv_bytes);
    std::memcpy(fresh.data(), kv.k(0, 0), kv_bytes);
  });
  std::vector<uint8_t> bytes;
  row("serialize", [&] { bytes = serialize_entry(kv, src, tokens, ns); });
  row("deserialize+restore", [&] {
    Decoded<Entry> d = deserialize_entry(bytes, EntryExpect{ns.model, ns.kv_type, s});  // copies bytes in
    check(d.ok() && restore_entry(d.value, kv, dst) == EntryError::kOk, "restore");
  });
  std::vector<uint8_t> zbytes;
  row("serialize zstd-1", [&] { zbytes = serialize_entry(kv, src, tokens, ns, {true, 1}); });
  row("deserialize+restore zstd-1", [&] {
    Decoded<Entry> d = deserialize_entry(zbytes, EntryExpect{ns.model, ns.kv_type, s});
    check(d.ok() && restore_entry(d.value, kv, dst) == EntryError::kOk, "restore zstd");
  });

  if (!opt.dir.empty()) {
    const std::string plain = opt.dir + "/plain.bin";
    {
      const int fd = ::open(plain.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      check(fd >= 0 && ::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()), "write " + plain);
      ::close(fd);
    }
    row("plain file read (page cache)", [&] {
      const int fd = ::open(plain.c_str(), O_RDONLY | O_CLOEXEC);
      size_t got = 0;
      while (got < copy.size()) {
        const ssize_t r = ::read(fd, copy.data() + got, copy.size() - got);
        if (r <= 0) break;
        got += size_t(r);
      }
      ::close(fd);
      check(got == copy.size(), "read " + plain);
    });
    ::unlink(plain.c_str());
    DiskTierOptions dopt;
    dopt.capacity_bytes = 4 * bytes.size();
    dopt.fsync = opt.fsync;
    DiskTier disk(opt.dir + "/tier", dopt);
    row(opt.fsync ? "disk put (serialize+write+fsync)" : "disk put (serialize+write)", [&] {
      disk.erase(ns, s, tokens);
      check(disk.put(serialize_entry(kv, src, tokens, ns)) == TierStatus::kOk, "disk put");
    });
    row("disk get+restore", [&] {
      TierLookup r = disk.get(ns, s, tokens);
      check(r.hit() && restore_entry(r.entry, kv, dst) == EntryError::kOk, "disk get");
    });
    disk.erase(ns, s, tokens);
    row(opt.fsync ? "disk chain put (links, +fsync)" : "disk chain put (links)", [&] {
      for (const TierItem& it : disk.list()) disk.erase_key(it.key);
      for (const auto& link : serialize_chain(kv, src, tokens, ns)) check(disk.put(link) == TierStatus::kOk, "disk link put");
    });
    row("disk chain read+restore", [&] { restore_chain_into(disk.read_prefix(ns, s, tokens), kv, full_pages, "disk chain"); });
    for (const TierItem& it : disk.list()) disk.erase_key(it.key);
  }
  if (!opt.redis_url.empty()) {
    RedisTierOptions ropt;
    ropt.url = opt.redis_url;
    ropt.ttl_seconds = 600;
    ropt.command_timeout_ms = 2000;  // 92 MB values
    RedisTier redis(ropt);
    row("redis put (serialize+SET)", [&] {
      check(redis.put(serialize_entry(kv, src, tokens, ns)) == TierStatus::kOk, "redis put");
    });
    row("redis get+restore", [&] {
      TierLookup r = redis.get(ns, s, tokens);
      check(r.hit() && restore_entry(r.entry, kv, dst) == EntryError::kOk, "redis get: " + r.message);
    });
    redis.erase(ns, s, tokens);
    row("redis chain put (links)", [&] {
      for (const auto& link : serialize_chain(kv, src, tokens, ns)) check(redis.put(link) == TierStatus::kOk, "redis link put");
    });
    row("redis chain read+restore", [&] { restore_chain_into(redis.read_prefix(ns, s, tokens), kv, full_pages, "redis chain"); });
    for (const ChainLink& l : chain_links(ns, s, tokens)) redis.erase_value(RedisTier::key_name(l.key));
  }
  return rows;
}

std::string format_tier_bench(const TierBenchOptions& opt, const std::vector<TierBenchRow>& rows) {
  char line[160];
  std::snprintf(line, sizeof line, "entry: %d tokens, %d layers x %d KV heads x head dim %d, %.1f MB of KV\n",
                opt.n_tokens, opt.shape.n_layer, opt.shape.n_kv_head, opt.shape.head_dim,
                rows.empty() ? 0.0 : double(rows[0].bytes) / 1e6);
  std::string out = line;
  for (const TierBenchRow& r : rows) {
    std::snprintf(line, sizeof line, "%-36s %9.2f ms %8.2f GB/s\n", r.name.c_str(), r.seconds * 1e3, r.gb_per_s());
    out += line;
  }
  return out;
}

}  // namespace pc
