#include "tier/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include "common/error.h"

namespace pc {

namespace {

int64_t unix_now() { return int64_t(::time(nullptr)); }

constexpr const char* kSuffix = ".kv";
constexpr const char* kKeepSuffix = ".keep";
constexpr const char* kTempSuffix = ".part";

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Reads exactly n bytes at offset; false on a short read or an error.
bool read_at(int fd, uint8_t* dst, size_t n, off_t off) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, dst, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    dst += r;
    n -= size_t(r);
    off += r;
  }
  return true;
}

// 0 or errno.
int write_all(int fd, const uint8_t* src, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, src, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    src += w;
    n -= size_t(w);
  }
  return 0;
}

int fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

bool is_no_space(int err) { return err == ENOSPC || err == EDQUOT; }

}  // namespace

DiskTier::DiskTier(std::string dir, uint64_t capacity_bytes)
    : DiskTier(std::move(dir), DiskTierOptions{capacity_bytes, true, nullptr}) {}

DiskTier::DiskTier(std::string dir, DiskTierOptions opt) : dir_(std::move(dir)), opt_(std::move(opt)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw Error("disk cache: cannot create directory " + dir_ + (ec ? ": " + ec.message() : ""));
  const std::string lock = dir_ + "/.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw Error("disk cache: cannot open " + lock + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw Error("disk cache: " + dir_ + " is in use by another process");
  }
  scan();
}

DiskTier::~DiskTier() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::string DiskTier::path_of(uint64_t key) const { return dir_ + "/" + key_hex(key) + kSuffix; }
std::string DiskTier::keep_path_of(uint64_t key) const { return dir_ + "/" + key_hex(key) + kKeepSuffix; }

int64_t DiskTier::read_keep(uint64_t key) const {
  const int fd = ::open(keep_path_of(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  int64_t v = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] < '0' || buf[i] > '9' || v > (int64_t(1) << 40)) return 0;  // not ours: no lifetime
    v = v * 10 + (buf[i] - '0');
  }
  return v;
}

void DiskTier::write_keep(uint64_t key, int64_t keep_until) {
  const std::string text = std::to_string(keep_until);
  const std::string tmp = dir_ + "/." + key_hex(key) + "." + std::to_string(++temp_seq_) + kTempSuffix;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    ++stats_.io_errors;
    return;
  }
  int err = write_all(fd, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  if (!err && opt_.fsync && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), keep_path_of(key).c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    ++stats_.io_errors;  // the entry stays; only its lifetime is not durable
  }
}

// Startup: drop temporary files, validate headers, order by mtime, trim to capacity.
void DiskTier::scan() {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) throw Error("disk cache: cannot read directory " + dir_ + ": " + std::strerror(errno));
  struct Found {
    int64_t mtime_ns;
    Item item;
  };
  std::vector<uint64_t> keeps;  // .keep files seen
  std::vector<Found> found;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    if (ends_with(name, kTempSuffix)) {
      if (::unlink(path.c_str()) == 0) ++stats_.temp_removed;
      continue;
    }
    uint64_t key = 0;
    if (ends_with(name, kKeepSuffix) && parse_key_hex(name.substr(0, name.size() - 5), &key)) {
      keeps.push_back(key);
      continue;
    }
    if (!ends_with(name, kSuffix) || !parse_key_hex(name.substr(0, name.size() - 3), &key)) continue;
    Item item;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!load_header(path, key, &item)) {
      ::unlink(path.c_str());
      ++stats_.corrupt_deleted;
      continue;
    }
    found.push_back({int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, std::move(item)});
  }
  // Oldest first; of equal times (a chain touched within one clock tick) the later link
  // is the older, so that eviction keeps taking chains from their tails.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.item.start > b.item.start;
  });
  for (Found& f : found) {  // oldest first, each pushed to the front
    const uint64_t key = f.item.key;
    lru_.push_front(key);
    bytes_ += f.item.bytes;
    tokens_ += f.item.n_tokens;
    items_.emplace(key, Slot{std::move(f.item), lru_.begin()});
  }
  const int64_t now = unix_now();
  for (uint64_t key : keeps) {
    auto it = items_.find(key);
    if (it == items_.end()) {
      ::unlink(keep_path_of(key).c_str());  // its entry is gone
      continue;
    }
    const int64_t until = read_keep(key);
    if (until > now) it->second.item.keep_until = until;
    else ::unlink(keep_path_of(key).c_str());  // ran out (or unreadable)
  }
  evict_to(opt_.capacity_bytes);
}

// Reads and validates a file's header; fills `item`. False when the file is invalid.
bool DiskTier::load_header(const std::string& path, uint64_t key_from_name, Item* item) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = false;
  std::vector<uint8_t> head(kEntryFixedHeader);
  if (::fstat(fd, &st) == 0 && read_at(fd, head.data(), head.size(), 0)) {
    const uint32_t hb = entry_header_bytes(head);
    if (hb >= kEntryFixedHeader && hb <= uint64_t(st.st_size) && hb <= (uint32_t(1) << 30)) {
      head.resize(hb);
      if (read_at(fd, head.data() + kEntryFixedHeader, hb - kEntryFixedHeader, kEntryFixedHeader)) {
        Decoded<EntryInfo> h = parse_entry_header(head, uint64_t(st.st_size));
        if (h.ok() && h.value.key() == key_from_name) {
          item->key = key_from_name;
          item->bytes = uint64_t(st.st_size);
          item->n_tokens = h.value.n_tokens();
          item->start = h.value.link.start;
          item->ns = std::move(h.value.ns);
          item->state = h.value.has_state();
          ok = true;
        }
      }
    }
  }
  ::close(fd);
  return ok;
}

void DiskTier::touch(uint64_t key, bool touch_file) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  if (touch_file) ::utimensat(AT_FDCWD, path_of(key).c_str(), nullptr, 0);  // mtime = now
}

void DiskTier::remove(uint64_t key, bool count_corrupt) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  ::unlink(path_of(key).c_str());
  if (it->second.item.keep_until != 0) ::unlink(keep_path_of(key).c_str());
  bytes_ -= it->second.item.bytes;
  tokens_ -= it->second.item.n_tokens;
  lru_.erase(it->second.lru);
  items_.erase(it);
  if (count_corrupt) ++stats_.corrupt_deleted;
}

// The least recently used entry not kept by a lifetime (put's keep_seconds).
bool DiskTier::evict_one() {
  const int64_t now = unix_now();
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    if (items_.at(*it).item.keep_until > now) continue;
    remove(*it, false);
    ++stats_.evicted;
    return true;
  }
  return false;
}

void DiskTier::evict_to(uint64_t target_bytes) {
  while (bytes_ > target_bytes && evict_one()) {
  }
}

int DiskTier::write_file(uint64_t key, std::span<const uint8_t> bytes) {
  if (opt_.inject_write_error) {
    if (const int err = opt_.inject_write_error(bytes.size())) return err;
  }
  const std::string tmp = dir_ + "/." + key_hex(key) + "." + std::to_string(++temp_seq_) + kTempSuffix;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = write_all(fd, bytes.data(), bytes.size());
  if (!err && opt_.fsync && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), path_of(key).c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return err;
  }
  if (opt_.fsync) fsync_dir(dir_);  // the rename is durable; failure here loses nothing visible
  return 0;
}

TierStatus DiskTier::put(std::span<const uint8_t> entry_bytes, int64_t keep_seconds) {
  Decoded<EntryInfo> h = parse_entry_header(entry_bytes, entry_bytes.size());
  if (!h.ok()) return TierStatus::kInvalid;
  const uint64_t key = h.value.key();
  const uint64_t size = entry_bytes.size();
  const int64_t keep_until = keep_seconds > 0 ? unix_now() + keep_seconds : 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = items_.find(key); it != items_.end()) {
    if (keep_until > it->second.item.keep_until) {
      it->second.item.keep_until = keep_until;
      write_keep(key, keep_until);
    }
    touch(key, true);
    return TierStatus::kOk;
  }
  if (size > opt_.capacity_bytes) {
    ++stats_.put_failures;
    return TierStatus::kTooLarge;
  }
  evict_to(opt_.capacity_bytes - size);
  if (bytes_ + size > opt_.capacity_bytes) {  // what is left is kept by lifetimes
    ++stats_.put_failures;
    return TierStatus::kNoSpace;
  }
  int err = write_file(key, entry_bytes);
  if (is_no_space(err)) {
    // The file system is fuller than our capacity says: free the entry's size once more.
    ++stats_.enospc_retries;
    const uint64_t target = bytes_ > size ? bytes_ - size : 0;
    evict_to(target);
    err = write_file(key, entry_bytes);
  }
  if (err) {
    ++stats_.put_failures;
    if (!is_no_space(err)) ++stats_.io_errors;
    return is_no_space(err) ? TierStatus::kNoSpace : TierStatus::kIoError;
  }
  if (keep_until > 0) write_keep(key, keep_until);
  lru_.push_front(key);
  Item item{key, size, h.value.n_tokens(), h.value.link.start, std::move(h.value.ns), keep_until,
            h.value.has_state()};
  tokens_ += item.n_tokens;
  items_.emplace(key, Slot{std::move(item), lru_.begin()});
  bytes_ += size;
  ++stats_.puts;
  stats_.bytes_written += int64_t(size);
  return TierStatus::kOk;
}

// Reads and fully validates the file of `key`; deletes it when invalid.
TierLookup DiskTier::read_entry(uint64_t key, const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                                std::span<const int32_t> tokens, uint64_t state_bytes) {
  TierLookup r;
  const std::string path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    remove(key, false);  // gone behind our back
    r.status = TierStatus::kMiss;
    return r;
  }
  std::vector<uint8_t> bytes(size_t(st.st_size));
  const bool read_ok = read_at(fd, bytes.data(), bytes.size(), 0);
  ::close(fd);
  if (!read_ok) {
    ++stats_.io_errors;
    r.status = TierStatus::kIoError;
    r.message = "disk cache: cannot read " + path;
    return r;
  }
  stats_.bytes_read += int64_t(bytes.size());
  Decoded<Entry> d = deserialize_asked_entry(std::move(bytes), ns, shape, link, tokens, state_bytes);
  if (!d.ok()) {
    remove(key, true);
    r.status = TierStatus::kMiss;
    r.message = "disk cache: deleted " + path + ": " + d.message;
    return r;
  }
  r.status = TierStatus::kOk;
  r.length = int32_t(tokens.size());
  r.entry = std::move(d.value);
  return r;
}

bool DiskTier::read_item(uint64_t key, std::vector<uint8_t>* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!items_.count(key)) return false;
  const int fd = ::open(path_of(key).c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  bytes->resize(size_t(st.st_size));
  const bool ok = read_at(fd, bytes->data(), bytes->size(), 0);
  ::close(fd);
  if (!ok) ++stats_.io_errors;
  else stats_.bytes_read += int64_t(bytes->size());
  return ok;
}

TierLookup DiskTier::get(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  const uint64_t key = entry_key(ns, shape, tokens);
  std::lock_guard<std::mutex> lock(mu_);
  TierLookup r;
  if (items_.count(key)) r = read_entry(key, ns, shape, LinkPos{}, tokens);
  if (r.hit()) touch(key, true);
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

TierLookup DiskTier::get_state(const KvNamespace& ns, const KvShape& shape, const LinkPos& link,
                               std::span<const int32_t> tokens, uint64_t state_bytes) {
  const uint64_t key = state_key(ns, shape, link.parent, tokens);
  std::lock_guard<std::mutex> lock(mu_);
  TierLookup r;
  if (items_.count(key)) r = read_entry(key, ns, shape, link, tokens, state_bytes);
  if (r.hit()) touch(key, true);
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

TierChain DiskTier::read_chain(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens,
                               std::span<const ChainLink> links) {
  std::lock_guard<std::mutex> lock(mu_);
  TierChain r;
  for (const ChainLink& l : links) {
    if (l.start < 0 || size_t(l.start) + size_t(l.length) > tokens.size() || !items_.count(l.key)) break;
    TierLookup c = read_entry(l.key, ns, shape, LinkPos{l.start, l.parent},
                              tokens.subspan(size_t(l.start), size_t(l.length)));
    if (!c.hit()) {
      r.message = c.message;  // corrupt (deleted) or unreadable: the chain stops here
      break;
    }
    r.links.push_back(std::move(c.entry));
  }
  for (size_t i = r.links.size(); i-- > 0;) touch(links[i].key, true);  // tail first: the root ends newest
  if (!r.links.empty()) r.status = TierStatus::kOk;
  ++(r.hit() ? stats_.hits : stats_.misses);
  return r;
}

std::vector<char> DiskTier::has(std::span<const uint64_t> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<char> out;
  out.reserve(keys.size());
  for (uint64_t k : keys) out.push_back(items_.count(k) ? 1 : 0);
  return out;
}

void DiskTier::touch_chain(std::span<const uint64_t> keys_root_first) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = keys_root_first.size(); i-- > 0;) touch(keys_root_first[i], true);
}

bool DiskTier::contains(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) const {
  const uint64_t key = entry_key(ns, shape, tokens);
  std::lock_guard<std::mutex> lock(mu_);
  return items_.count(key) > 0;
}

bool DiskTier::erase(const KvNamespace& ns, const KvShape& shape, std::span<const int32_t> tokens) {
  const uint64_t key = entry_key(ns, shape, tokens);
  std::lock_guard<std::mutex> lock(mu_);
  if (!items_.count(key)) return false;
  remove(key, false);
  return true;
}

bool DiskTier::erase_key(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!items_.count(key)) return false;
  remove(key, false);
  return true;
}

std::vector<DiskTier::Item> DiskTier::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Item> out;
  out.reserve(lru_.size());
  for (uint64_t key : lru_) out.push_back(items_.at(key).item);
  return out;
}

TierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  const Counters& c = stats_;
  TierStats s;
  s.name = name();
  s.entries = int64_t(items_.size());
  s.bytes = int64_t(bytes_);
  s.tokens = tokens_;
  c.fill(s);
  s.capacity_bytes = int64_t(opt_.capacity_bytes);
  s.errors = c.io_errors;
  s.counters = {{"evicted", c.evicted},
                {"enospc_retries", c.enospc_retries},
                {"temp_removed", c.temp_removed},
                {"io_errors", c.io_errors}};
  s.info = {{"dir", dir_}};
  return s;
}

}  // namespace pc
