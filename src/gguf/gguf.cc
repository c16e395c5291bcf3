// GGUF reader and writer (see gguf.h for the file layout).
//
// The reader never trusts a count or a length: before it allocates or reads, it
// checks the claim against the bytes that remain in the file, so a corrupt or
// truncated file produces a pc::Error naming the file, the item being read and the
// byte offset, never a crash or an out-of-bounds read.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <vector>

namespace pc {

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Nesting limit for arrays of arrays (real files nest at most once); keeps the
// recursive parser's stack bounded on hostile input.
constexpr int kMaxArrayDepth = 8;
// Largest metadata array we accept. Each element becomes a GgufValue (~100 bytes),
// so this bounds memory on hostile input; real vocabularies have < 1M entries.
constexpr uint64_t kMaxArrayElems = uint64_t{1} << 24;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

bool is_unsigned_type(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64;
}

bool is_signed_type(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}

// Encoded size of a fixed-size value type; 0 for STRING and ARRAY.
uint64_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

// Fewest bytes one value of type t can occupy: a string is at least its u64 length,
// an array at least its u32 element type and u64 count.
uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return 8;
  if (t == GgufType::ARRAY) return 12;
  return fixed_size(t);
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// ---------------------------------------------------------------------------
// Bounds-checked little-endian cursor over the file bytes. `context` describes the
// item being parsed ("metadata key #3 'general.name'") and goes into every error.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& file)
      : base_(base), size_(size), file_(file) {}

  uint64_t pos() const { return pos_; }
  void seek(uint64_t p) { pos_ = p; }
  uint64_t remaining() const { return size_ - pos_; }
  void set_context(std::string c) { context_ = std::move(c); elem_ = -1; }
  void set_element(int64_t e) { elem_ = e; }

  [[noreturn]] void fail(const std::string& problem, uint64_t at) const {
    std::string msg = file_ + ": " + context_;
    if (elem_ >= 0) msg += " element " + std::to_string(elem_);
    throw Error(msg + ": " + problem + " at offset " + hex(at));
  }
  [[noreturn]] void fail(const std::string& problem) const { fail(problem, pos_); }

  // Ensures n more bytes exist; `what` + `suffix` names the field being read.
  void need(uint64_t n, const char* what, const char* suffix = "") const {
    if (n > remaining())
      fail(std::string("truncated reading ") + what + suffix + " (needs " + std::to_string(n) +
           " bytes, " + std::to_string(remaining()) + " remain)");
  }

  template <class T>
  T read(const char* what, const char* suffix = "") {
    need(sizeof(T), what, suffix);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));  // the format and our hosts are little-endian
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    uint64_t at = pos_;
    uint64_t len = read<uint64_t>(what, " length");
    if (len > remaining())
      fail(std::string(what) + " length " + std::to_string(len) + " exceeds remaining " +
               std::to_string(remaining()) + " bytes",
           at);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }

  // Rejects a count whose items, at `min_size` bytes each, cannot fit in what is left.
  void check_count(uint64_t n, uint64_t min_size, const char* what, uint64_t at) const {
    if (min_size != 0 && n > remaining() / min_size)
      fail(std::string(what) + " " + std::to_string(n) + " exceeds what the remaining " +
               std::to_string(remaining()) + " bytes could hold",
           at);
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& file_;
  std::string context_ = "header";
  int64_t elem_ = -1;
};

GgufValue read_value(Cursor& c, GgufType type, int depth);

GgufValue read_array(Cursor& c, int depth) {
  uint64_t at = c.pos();
  uint32_t et = c.read<uint32_t>("array element type");
  if (!is_valid_value_type(et)) c.fail("unknown array element type " + std::to_string(et), at);
  GgufType elem = static_cast<GgufType>(et);
  if (elem == GgufType::ARRAY && depth + 1 >= kMaxArrayDepth)
    c.fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth), at);
  at = c.pos();
  uint64_t n = c.read<uint64_t>("array length");
  c.check_count(n, min_encoded_size(elem), "array length", at);
  if (n > kMaxArrayElems)
    c.fail("array length " + std::to_string(n) + " exceeds the limit " +
               std::to_string(kMaxArrayElems),
           at);
  std::vector<GgufValue> elems;
  elems.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (depth == 0) c.set_element(static_cast<int64_t>(i));
    elems.push_back(read_value(c, elem, depth + 1));
  }
  if (depth == 0) c.set_element(-1);
  return GgufValue::make_array(elem, std::move(elems));
}

GgufValue read_value(Cursor& c, GgufType type, int depth) {
  switch (type) {
    case GgufType::UINT8: return GgufValue::make_uint(type, c.read<uint8_t>("u8 value"));
    case GgufType::UINT16: return GgufValue::make_uint(type, c.read<uint16_t>("u16 value"));
    case GgufType::UINT32: return GgufValue::make_uint(type, c.read<uint32_t>("u32 value"));
    case GgufType::UINT64: return GgufValue::make_uint(type, c.read<uint64_t>("u64 value"));
    case GgufType::INT8: return GgufValue::make_int(type, c.read<int8_t>("i8 value"));
    case GgufType::INT16: return GgufValue::make_int(type, c.read<int16_t>("i16 value"));
    case GgufType::INT32: return GgufValue::make_int(type, c.read<int32_t>("i32 value"));
    case GgufType::INT64: return GgufValue::make_int(type, c.read<int64_t>("i64 value"));
    case GgufType::FLOAT32: return GgufValue::make_float(type, c.read<float>("f32 value"));
    case GgufType::FLOAT64: return GgufValue::make_float(type, c.read<double>("f64 value"));
    case GgufType::BOOL: return GgufValue::make_bool(c.read<uint8_t>("bool value") != 0);
    case GgufType::STRING: return GgufValue::make_string(c.read_string("string"));
    case GgufType::ARRAY: return read_array(c, depth);
  }
  c.fail("unknown value type " + std::to_string(static_cast<uint32_t>(type)));
}

// ---------------------------------------------------------------------------
// Writer helpers: append little-endian values to a byte buffer.

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// Integer payload of v, whichever of i/u its own type keeps it in.
uint64_t bits_unsigned(const GgufValue& v) {
  return is_unsigned_type(v.type) ? v.u : static_cast<uint64_t>(v.i);
}
int64_t bits_signed(const GgufValue& v) {
  return is_unsigned_type(v.type) ? static_cast<int64_t>(v.u) : v.i;
}

// Encodes v's payload as `type` (no type tag: tags are written by the caller).
void put_value(std::vector<uint8_t>& out, GgufType type, const GgufValue& v) {
  switch (type) {
    case GgufType::UINT8: put<uint8_t>(out, bits_unsigned(v)); break;
    case GgufType::UINT16: put<uint16_t>(out, bits_unsigned(v)); break;
    case GgufType::UINT32: put<uint32_t>(out, bits_unsigned(v)); break;
    case GgufType::UINT64: put<uint64_t>(out, bits_unsigned(v)); break;
    case GgufType::INT8: put<int8_t>(out, bits_signed(v)); break;
    case GgufType::INT16: put<int16_t>(out, bits_signed(v)); break;
    case GgufType::INT32: put<int32_t>(out, bits_signed(v)); break;
    case GgufType::INT64: put<int64_t>(out, bits_signed(v)); break;
    case GgufType::BOOL: put<uint8_t>(out, bits_signed(v) != 0); break;
    case GgufType::FLOAT32: put<float>(out, static_cast<float>(v.f)); break;
    case GgufType::FLOAT64: put<double>(out, v.f); break;
    case GgufType::STRING: put_string(out, v.s); break;
    case GgufType::ARRAY:
      if (v.type != GgufType::ARRAY) throw Error("GgufWriter: array element is not an array");
      put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(out, v.arr.size());
      for (const GgufValue& e : v.arr) put_value(out, v.elem_type, e);
      break;
    default:
      throw Error("GgufWriter: unknown value type " +
                  std::to_string(static_cast<uint32_t>(type)));
  }
}

const GgufValue* find_kv(const std::vector<std::pair<std::string, GgufValue>>& kv,
                         std::string_view key) {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace

// ===========================================================================
// GgufValue

bool GgufValue::is_integer() const { return is_unsigned_type(type) || is_signed_type(type); }

std::string gguf_type_name(GgufType t) {
  static const char* const kNames[] = {"UINT8", "INT8",   "UINT16", "INT16", "UINT32",
                                       "INT32", "FLOAT32", "BOOL",  "STRING", "ARRAY",
                                       "UINT64", "INT64", "FLOAT64"};
  uint32_t id = static_cast<uint32_t>(t);
  if (id < sizeof(kNames) / sizeof(kNames[0])) return kNames[id];
  return "type#" + std::to_string(id);
}

std::string GgufValue::to_string(size_t max_elems) const {
  if (is_unsigned_type(type)) return std::to_string(u);
  if (is_signed_type(type)) return std::to_string(i);
  switch (type) {
    case GgufType::BOOL: return i ? "true" : "false";
    case GgufType::FLOAT32: case GgufType::FLOAT64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.9g", f);
      return buf;
    }
    case GgufType::STRING: return "\"" + s + "\"";
    case GgufType::ARRAY: {
      std::string r = "[";
      for (size_t k = 0; k < arr.size() && k < max_elems; ++k)
        r += (k ? ", " : "") + arr[k].to_string(max_elems);
      if (arr.size() > max_elems) r += ", ... (" + std::to_string(arr.size()) + " total)";
      return r + "]";
    }
    default: return "?";
  }
}

GgufValue GgufValue::make_uint(GgufType t, uint64_t v) {
  GgufValue r;
  r.type = t;
  r.u = v;
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) r.i = static_cast<int64_t>(v);
  return r;
}

GgufValue GgufValue::make_int(GgufType t, int64_t v) {
  GgufValue r;
  r.type = t;
  r.i = v;
  if (v >= 0) r.u = static_cast<uint64_t>(v);
  return r;
}

GgufValue GgufValue::make_float(GgufType t, double v) {
  GgufValue r;
  r.type = t;
  r.f = v;
  return r;
}

GgufValue GgufValue::make_bool(bool v) {
  GgufValue r;
  r.type = GgufType::BOOL;
  r.i = v;
  r.u = v;
  return r;
}

GgufValue GgufValue::make_string(std::string v) {
  GgufValue r;
  r.type = GgufType::STRING;
  r.s = std::move(v);
  return r;
}

GgufValue GgufValue::make_array(GgufType elem, std::vector<GgufValue> elems) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = elem;
  r.arr = std::move(elems);
  return r;
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// ===========================================================================
// GgufFile: opening

namespace {

// MemAvailable of /proc/meminfo in bytes; 0 if unknown.
uint64_t mem_available() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

// Bytes a thread of copy_to_memory claims at a time: few claims, and the
// threads still finish together (a 600 MB file is 10 chunks).
constexpr uint64_t kCopyChunk = uint64_t(64) << 20;
// The line the copy in memory puts tensors on (line_shift).
constexpr uint64_t kCopyLine = 64;

// The offset in [0, kCopyLine) to copy a file at so that the most tensor
// bytes start on a line (a tensor's file offset: data_offset + its offset).
uint64_t line_shift(uint64_t data_offset, const std::vector<GgufTensorInfo>& tensors) {
  uint64_t bytes[kCopyLine] = {};
  for (const GgufTensorInfo& t : tensors)
    bytes[(kCopyLine - (data_offset + t.offset) % kCopyLine) % kCopyLine] += t.nbytes;
  return uint64_t(std::max_element(bytes, bytes + kCopyLine) - bytes);
}

// The whole file in anonymous memory advised for huge pages, starting `shift`
// bytes into a region of size + shift bytes, or nullptr (the caller keeps the
// file mapped). Read in chunks of kCopyChunk by n_threads threads
// (at most 8): each page of the copy is faulted in, zeroed and filled by
// whichever thread reads it, so the work a byte costs — the fault, the
// zeroing, the copy from the page cache or the disk's read — runs on every
// core instead of one (a 4.9 GB model from the page cache on a 2-core VM:
// 0.84-2.6 s on one thread, 0.45-0.62 s on two).
void* copy_to_memory(int fd, uint64_t size, uint64_t shift, int n_threads) {
  const uint64_t avail = mem_available();
  if (avail > 0 && size > avail / 2) return nullptr;
  void* region = ::mmap(nullptr, size + shift, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return nullptr;
  char* const m = static_cast<char*>(region) + shift;
#ifdef MADV_HUGEPAGE
  ::madvise(region, size + shift, MADV_HUGEPAGE);  // advice only: without THP it is a plain copy
#endif
  const uint64_t chunks = (size + kCopyChunk - 1) / kCopyChunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (uint64_t c; !failed.load(std::memory_order_relaxed) && (c = next.fetch_add(1)) < chunks;) {
      const uint64_t end = std::min(size, (c + 1) * kCopyChunk);
      for (uint64_t off = c * kCopyChunk; off < end;) {
        const ssize_t got = ::pread(fd, m + off, size_t(end - off), off_t(off));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          failed.store(true);
          return;
        }
        off += uint64_t(got);
      }
    }
  };
  std::vector<std::thread> threads;
  const uint64_t helpers = std::min<uint64_t>(uint64_t(std::clamp(n_threads, 1, 8)), chunks) - 1;
  for (uint64_t i = 0; i < helpers; ++i) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // the threads started (or this one) read the rest
    }
  }
  work();
  for (std::thread& t : threads) t.join();
  if (failed.load()) {
    ::munmap(region, size + shift);
    return nullptr;
  }
  // The copy stays writable. Made read-only with mprotect, its first pass
  // after loading ran slowly on the 2-core VMs this was measured on (an
  // mprotect of populated memory costs its next reads there): an 8B shape's
  // first 16-token prompt after a load from disk took 430-1020 ms against
  // 270-310 for the next (4 runs), 260-420 ms with the copy left writable;
  // a 4 GiB buffer, written, read at 0.07 s a pass, then 0.65 s on its first
  // pass after an mprotect to read-only.
  return region;
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, Residency r, int copy_threads) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    f->parse();  // (fails: no header)
    return f;
  }
  // Mapped and parsed first: the header says where the tensor data starts.
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    int e = errno;
    ::close(fd);
    throw Error(path + ": cannot mmap: " + std::strerror(e));
  }
  f->map_ = m;
  f->map_bytes_ = f->size_;
  f->base_ = static_cast<const uint8_t*>(m);
  try {
    f->parse();
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (r == Residency::kMemory) {
    // The copy starts where most of the tensors' bytes fall on a cache line:
    // GGUF aligns tensors to 32 bytes from a data section that starts
    // wherever the metadata ends (a Llama-3 vocabulary's file: 32 bytes past
    // a line), and a tensor half a line off makes every 64-byte vector load
    // of its weights straddle two lines (prompt matmuls of Q4_K, Q5_K and
    // Q8_0 weights 0.90-0.96x as fast that way, Llama-3-8B shapes, Zen 5).
    const uint64_t shift = line_shift(f->data_offset_, f->tensors_);
    if (void* copy = copy_to_memory(fd, f->size_, shift, copy_threads)) {
      ::munmap(f->map_, f->map_bytes_);
      f->map_ = copy;
      f->map_bytes_ = f->size_ + shift;
      f->base_ = static_cast<const uint8_t*>(copy) + shift;
      f->residency_ = Residency::kMemory;
      for (GgufTensorInfo& t : f->tensors_) t.data = f->base_ + f->data_offset_ + t.offset;
    }
  }
  ::close(fd);
  return f;
}

std::unique_ptr<GgufFile> GgufFile::from_bytes(std::vector<uint8_t> bytes,
                                               const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

uint8_t* GgufFile::rewritable_bytes() {
  if (residency_ != Residency::kMemory || !map_) return nullptr;
  return const_cast<uint8_t*>(base_);
}

void GgufFile::release_tensor_bytes(const GgufTensorInfo& t) {
  if (!map_ || t.nbytes == 0) return;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.nbytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// ===========================================================================
// GgufFile: parsing

namespace {

void parse_header(Cursor& c, uint32_t& version, uint64_t& n_tensors, uint64_t& n_kv) {
  if (c.remaining() < 4)
    c.fail("file too small (" + std::to_string(c.remaining()) + " bytes) to be a GGUF file");
  uint32_t magic = c.read<uint32_t>("magic");
  if (std::memcmp(&magic, kMagic, 4) != 0)
    c.fail("bad magic " + hex(magic) + " (not a GGUF file)", 0);
  version = c.read<uint32_t>("version");
  if (version == 1) c.fail("unsupported GGUF version 1 (only versions 2 and 3 are supported)", 4);
  if (version != 2 && version != 3)
    c.fail("unsupported GGUF version " + std::to_string(version) +
               (version > 0xffff ? " (big-endian file?)" : ""),
           4);
  uint64_t at = c.pos();
  n_tensors = c.read<uint64_t>("n_tensors");
  uint64_t at_kv = c.pos();
  n_kv = c.read<uint64_t>("n_kv");
  // Smallest tensor info: name length, n_dims, one dim, type, offset = 32 bytes.
  // Smallest key/value: key length, type tag, one byte of value = 13 bytes.
  c.check_count(n_kv, 13, "n_kv", at_kv);
  if (n_tensors > c.remaining() / 32 || n_kv * 13 + n_tensors * 32 > c.remaining())
    c.fail("n_tensors " + std::to_string(n_tensors) + " exceeds what the remaining " +
               std::to_string(c.remaining()) + " bytes could hold",
           at);
}

// `at` is the file offset of the value (for errors).
uint64_t parse_alignment(Cursor& c, const GgufValue* v, uint64_t at) {
  if (!v) return kDefaultAlignment;
  c.set_context("metadata key 'general.alignment'");
  if (!v->is_integer()) c.fail("has type " + gguf_type_name(v->type) + ", expected an integer", at);
  if (v->i <= 0 || !is_pow2(static_cast<uint64_t>(v->i)) || v->i > (int64_t{1} << 30))
    c.fail("alignment " + v->to_string() + " is not a nonzero power of two (up to 2^30)", at);
  return static_cast<uint64_t>(v->i);
}

// Reads one tensor info at the cursor; fills everything but `data`.
// `offset_at` receives the file position of the offset field (for later errors).
GgufTensorInfo parse_tensor_info(Cursor& c, uint64_t alignment, uint64_t& offset_at) {
  GgufTensorInfo t;
  uint64_t at = c.pos();
  uint32_t n_dims = c.read<uint32_t>("n_dims");
  if (n_dims < 1 || n_dims > kMaxDims)
    c.fail("n_dims " + std::to_string(n_dims) + " out of range 1.." + std::to_string(kMaxDims), at);
  int64_t n_elems = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    at = c.pos();
    uint64_t ne = c.read<uint64_t>("dimension");
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      c.fail("dimension " + std::to_string(d) + " = " + std::to_string(ne) +
                 " is not a positive 63-bit size", at);
    if (__builtin_mul_overflow(n_elems, static_cast<int64_t>(ne), &n_elems))
      c.fail("element count overflows (dimension " + std::to_string(d) + ")", at);
    t.ne.push_back(static_cast<int64_t>(ne));
  }
  at = c.pos();
  uint32_t type_id = c.read<uint32_t>("tensor type");
  t.type = static_cast<GgmlType>(type_id);
  int64_t be = ggml_block_elems(t.type), bb = ggml_block_bytes(t.type);
  if (be == 0 || type_id >= kFirstInternalTypeId) c.fail("unknown tensor type id " + std::to_string(type_id), at);
  if (t.ne[0] % be != 0)
    c.fail("row length " + std::to_string(t.ne[0]) + " is not a multiple of the block size " +
               std::to_string(be) + " of type " + ggml_type_name(t.type), at);
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(n_elems / be, bb, &nbytes))
    c.fail("byte size overflows", at);
  t.nbytes = static_cast<uint64_t>(nbytes);
  offset_at = c.pos();
  t.offset = c.read<uint64_t>("tensor data offset");
  if (t.offset % alignment != 0)
    c.fail("data offset " + hex(t.offset) + " is not a multiple of the alignment " +
               std::to_string(alignment), offset_at);
  return t;
}

// Checks that each tensor's bytes lie inside the file and that no two overlap.
// `offset_at[k]` is where tensor k's offset field sits (reported on error).
void check_tensor_data(Cursor& c, const std::vector<GgufTensorInfo>& tensors,
                       uint64_t data_offset, uint64_t file_size,
                       const std::vector<uint64_t>& offset_at) {
  std::vector<size_t> order(tensors.size());
  for (size_t k = 0; k < order.size(); ++k) {
    order[k] = k;
    const GgufTensorInfo& t = tensors[k];
    c.set_context("tensor #" + std::to_string(k) + " '" + t.name + "'");
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_offset, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.nbytes, &end) || end > file_size)
      c.fail("data [" + hex(t.offset) + ", +" + std::to_string(t.nbytes) +
                 " bytes) relative to the data section at " + hex(data_offset) +
                 " lies outside the file (size " + std::to_string(file_size) + ")",
             offset_at[k]);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = tensors[order[k - 1]];
    const GgufTensorInfo& t = tensors[order[k]];
    if (prev.offset + prev.nbytes > t.offset) {
      c.set_context("tensor #" + std::to_string(order[k]) + " '" + t.name + "'");
      c.fail("data overlaps tensor '" + prev.name + "'", offset_at[order[k]]);
    }
  }
}

}  // namespace

void GgufFile::parse() {
  Cursor c(base_, size_, path_);
  uint64_t n_tensors = 0, n_kv = 0;
  parse_header(c, version_, n_tensors, n_kv);

  std::unordered_set<std::string> seen;
  uint64_t align_at = 0;  // file offset of general.alignment's value
  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    c.set_context("metadata key #" + std::to_string(k));
    uint64_t at = c.pos();
    std::string key = c.read_string("key");
    c.set_context("metadata key #" + std::to_string(k) + " '" + key + "'");
    if (!seen.insert(key).second) c.fail("duplicate key", at);
    at = c.pos();
    uint32_t type = c.read<uint32_t>("value type");
    if (!is_valid_value_type(type)) c.fail("unknown value type " + std::to_string(type), at);
    if (key == "general.alignment") align_at = c.pos();
    GgufValue v = read_value(c, static_cast<GgufType>(type), 0);
    kv_.emplace_back(std::move(key), std::move(v));
  }
  alignment_ = parse_alignment(c, find("general.alignment"), align_at);

  seen.clear();
  std::vector<uint64_t> offset_at(n_tensors);
  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    c.set_context("tensor #" + std::to_string(k));
    uint64_t at = c.pos();
    std::string name = c.read_string("tensor name");
    c.set_context("tensor #" + std::to_string(k) + " '" + name + "'");
    if (!seen.insert(name).second) c.fail("duplicate tensor name", at);
    GgufTensorInfo t = parse_tensor_info(c, alignment_, offset_at[k]);
    t.name = std::move(name);
    tensors_.push_back(std::move(t));
  }
  data_offset_ = align_up(c.pos(), alignment_);
  check_tensor_data(c, tensors_, data_offset_, size_, offset_at);
  for (GgufTensorInfo& t : tensors_) t.data = base_ + data_offset_ + t.offset;
}

// ===========================================================================
// GgufFile: lookups

const GgufValue* GgufFile::find(std::string_view key) const { return find_kv(kv_, key); }

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key,
                             const GgufValue& v, const char* expected) {
  std::string got = gguf_type_name(v.type);
  if (v.type == GgufType::ARRAY) got += " of " + gguf_type_name(v.elem_type);
  throw Error(path + ": metadata key '" + std::string(key) + "' has type " + got +
              ", expected " + expected);
}

int64_t as_int(const std::string& path, std::string_view key, const GgufValue& v) {
  if (!v.is_integer()) wrong_type(path, key, v, "an integer");
  if (v.type == GgufType::UINT64 && v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(path + ": metadata key '" + std::string(key) + "' value " + v.to_string() +
                " does not fit in int64");
  return v.i;
}

const GgufValue* find_array(const GgufFile& f, std::string_view key, bool (*elem_ok)(GgufType),
                            const char* expected) {
  const GgufValue* v = f.find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::ARRAY || !elem_ok(v->elem_type)) wrong_type(f.path(), key, *v, expected);
  return v;
}

}  // namespace

std::string GgufFile::get_string(std::string_view key, const std::string& def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->type != GgufType::STRING) wrong_type(path_, key, *v, "STRING");
  return v->s;
}

int64_t GgufFile::get_int(std::string_view key, int64_t def) const {
  const GgufValue* v = find(key);
  return v ? as_int(path_, key, *v) : def;
}

double GgufFile::get_float(std::string_view key, double def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->is_float()) return v->f;
  if (v->is_integer()) return is_unsigned_type(v->type) ? static_cast<double>(v->u)
                                                       : static_cast<double>(v->i);
  wrong_type(path_, key, *v, "a number");
}

bool GgufFile::get_bool(std::string_view key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->type == GgufType::BOOL || v->is_integer()) return v->i != 0 || v->u != 0;
  wrong_type(path_, key, *v, "BOOL");
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find_array(*this, key, [](GgufType t) { return t == GgufType::STRING; },
                                  "ARRAY of STRING");
  std::vector<std::string> r;
  if (!v) return r;
  r.reserve(v->arr.size());
  for (const GgufValue& e : v->arr) r.push_back(e.s);
  return r;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find_array(
      *this, key,
      [](GgufType t) {
        return t == GgufType::FLOAT32 || t == GgufType::FLOAT64 || is_unsigned_type(t) ||
               is_signed_type(t);
      },
      "ARRAY of numbers");
  std::vector<float> r;
  if (!v) return r;
  r.reserve(v->arr.size());
  for (const GgufValue& e : v->arr)
    r.push_back(e.is_float() ? static_cast<float>(e.f)
                : is_unsigned_type(e.type) ? static_cast<float>(e.u)
                                           : static_cast<float>(e.i));
  return r;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find_array(
      *this, key, [](GgufType t) { return is_unsigned_type(t) || is_signed_type(t); },
      "ARRAY of integers");
  std::vector<int64_t> r;
  if (!v) return r;
  r.reserve(v->arr.size());
  for (const GgufValue& e : v->arr) r.push_back(as_int(path_, key, e));
  return r;
}

// ===========================================================================
// GgufWriter

void GgufWriter::set(const std::string& key, GgufValue v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  set(key, GgufValue::make_string(v));
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  set(key, GgufValue::make_uint(GgufType::UINT32, v));
}
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  set(key, GgufValue::make_uint(GgufType::UINT64, v));
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  set(key, GgufValue::make_int(GgufType::INT32, v));
}
void GgufWriter::set_f32(const std::string& key, float v) {
  set(key, GgufValue::make_float(GgufType::FLOAT32, v));
}
void GgufWriter::set_bool(const std::string& key, bool v) { set(key, GgufValue::make_bool(v)); }

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(GgufValue::make_string(s));
  set(key, GgufValue::make_array(GgufType::STRING, std::move(elems)));
}

const GgufValue* GgufWriter::find(std::string_view key) const { return find_kv(kv_, key); }

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> data) {
  const std::string what = "GgufWriter: tensor '" + name + "': ";
  for (const T& t : tensors_)
    if (t.name == name) throw Error(what + "duplicate name");
  if (ne.empty() || ne.size() > kMaxDims) throw Error(what + "needs 1..4 dimensions");
  int64_t be = ggml_block_elems(type);
  if (be == 0) throw Error(what + "unknown type " + ggml_type_name(type));
  int64_t rows = 1;  // product of ne[1..]
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) throw Error(what + "non-positive dimension");
    if (d > 0) rows *= ne[d];
  }
  if (ne[0] % be != 0)
    throw Error(what + "row length " + std::to_string(ne[0]) + " is not a multiple of " +
                std::to_string(be));
  uint64_t expect = static_cast<uint64_t>(ggml_row_bytes(type, ne[0]) * rows);
  if (data.size() != expect)
    throw Error(what + "has " + std::to_string(data.size()) + " bytes, expected " +
                std::to_string(expect));
  tensors_.push_back(T{name, type, std::move(ne), std::move(data)});
}

namespace {

// Alignment the writer uses: general.alignment when set (validated), else 32.
uint64_t writer_alignment(const GgufValue* v) {
  if (!v) return kDefaultAlignment;
  if (!v->is_integer() || v->i <= 0 || !is_pow2(static_cast<uint64_t>(v->i)))
    throw Error("GgufWriter: general.alignment must be a nonzero power of two");
  return static_cast<uint64_t>(v->i);
}

}  // namespace

namespace {

// What the header needs to know of a tensor.
struct TensorDesc {
  const std::string* name;
  GgmlType type;
  const std::vector<int64_t>* ne;
  uint64_t nbytes;
};

// Encodes everything before the tensor data (header, metadata, tensor infos,
// padding) and fills `offsets`: where each tensor's data goes relative to the data
// section, each padded to `alignment`.
std::vector<uint8_t> encode_header(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                   const std::vector<TensorDesc>& tensors, uint64_t alignment,
                                   std::vector<uint64_t>& offsets) {
  offsets.clear();
  uint64_t off = 0;
  for (const TensorDesc& t : tensors) {
    offsets.push_back(off);
    off = align_up(off + t.nbytes, alignment);
  }
  std::vector<uint8_t> out;
  uint32_t magic;
  std::memcpy(&magic, kMagic, 4);
  put<uint32_t>(out, magic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, kv.size());
  for (const auto& [key, v] : kv) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v.type, v);
  }
  for (size_t k = 0; k < tensors.size(); ++k) {
    put_string(out, *tensors[k].name);
    put<uint32_t>(out, static_cast<uint32_t>(tensors[k].ne->size()));
    for (int64_t d : *tensors[k].ne) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(tensors[k].type));
    put<uint64_t>(out, offsets[k]);
  }
  out.resize(align_up(out.size(), alignment), 0);
  return out;
}

}  // namespace

std::vector<uint8_t> GgufWriter::to_bytes() const {
  uint64_t alignment = writer_alignment(find("general.alignment"));
  std::vector<TensorDesc> descs;
  for (const T& t : tensors_) descs.push_back({&t.name, t.type, &t.ne, t.data.size()});
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = encode_header(kv_, descs, alignment, offsets);
  for (const T& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment), 0);
  }
  return out;
}

namespace {

// Writes all of buf to fd; false (errno set) on failure.
bool write_all(int fd, const uint8_t* buf, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void GgufWriter::write(const std::string& path) const {
  uint64_t alignment = writer_alignment(find("general.alignment"));
  std::vector<TensorDesc> descs;
  for (const T& t : tensors_) descs.push_back({&t.name, t.type, &t.ne, t.data.size()});
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = encode_header(kv_, descs, alignment, offsets);

  // Write to a temp file beside the target, then rename over it: readers see either
  // the old file or the complete new one.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot create temp file: " + std::strerror(errno));
  const std::vector<uint8_t> zeros(alignment, 0);
  bool ok = write_all(fd, header.data(), header.size());
  for (size_t k = 0; ok && k < tensors_.size(); ++k) {
    const std::vector<uint8_t>& d = tensors_[k].data;
    ok = write_all(fd, d.data(), d.size()) &&
         write_all(fd, zeros.data(), align_up(d.size(), alignment) - d.size());
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot write: " + std::strerror(err));
  }
}

}  // namespace pc
