// Corrupt and truncated GGUF input: every case must throw pc::Error with a message
// naming the problem, never crash or read out of bounds (CI also runs these tests,
// all named GgufCorrupt*, under AddressSanitizer).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/gguf.h"
#include "test_util.h"

namespace pc {
namespace {

// Hand-assembled GGUF bytes that remember where each field was written, so a test
// can patch exactly one field.
struct Builder {
  std::vector<uint8_t> b;
  template <class T>
  size_t put(T v) {
    size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return at;
  }
  size_t str(const std::string& s) {
    size_t at = put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return at;
  }
  template <class T>
  void patch(size_t at, T v) { std::memcpy(b.data() + at, &v, sizeof(T)); }
};

// Field offsets of the small valid file below.
struct Layout {
  size_t magic, version, n_tensors, n_kv;
  size_t key0_len, arch_type, arch_len;  // kv 0: general.architecture = "llama"
  size_t key1_len, align_value;          // kv 1: general.alignment = 32 (u32)
  size_t arr_type, arr_elem_type, arr_len;  // kv 2: test.arr = [1, 2, 3] (i32)
  size_t t0_name, t0_ndims, t0_ne0, t0_type, t0_offset;  // tensor "a": F32 [32, 2]
  size_t t1_name, t1_ndims, t1_ne0, t1_type, t1_offset;  // tensor "b": Q8_0 [64]
};

std::vector<uint8_t> small_file(Layout& L) {
  Builder w;
  L.magic = w.put<uint32_t>(0x46554747);  // "GGUF"
  L.version = w.put<uint32_t>(3);
  L.n_tensors = w.put<uint64_t>(2);
  L.n_kv = w.put<uint64_t>(3);
  L.key0_len = w.str("general.architecture");
  L.arch_type = w.put<uint32_t>(8);
  L.arch_len = w.str("llama");
  L.key1_len = w.str("general.alignment");
  w.put<uint32_t>(4);
  L.align_value = w.put<uint32_t>(32);
  w.str("test.arr");
  L.arr_type = w.put<uint32_t>(9);
  L.arr_elem_type = w.put<uint32_t>(5);
  L.arr_len = w.put<uint64_t>(3);
  for (int32_t v : {1, 2, 3}) w.put<int32_t>(v);
  L.t0_name = w.str("a");
  L.t0_ndims = w.put<uint32_t>(2);
  L.t0_ne0 = w.put<uint64_t>(32);
  w.put<uint64_t>(2);
  L.t0_type = w.put<uint32_t>(0);
  L.t0_offset = w.put<uint64_t>(0);
  L.t1_name = w.str("b");
  L.t1_ndims = w.put<uint32_t>(1);
  L.t1_ne0 = w.put<uint64_t>(64);
  L.t1_type = w.put<uint32_t>(8);
  L.t1_offset = w.put<uint64_t>(256);
  w.b.resize((w.b.size() + 31) / 32 * 32, 0);
  w.b.resize(w.b.size() + 256 + 68, 0x11);
  return w.b;
}

// Parses bytes, expecting a pc::Error whose message contains every `needle`.
void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> needles) {
  try {
    GgufFile::from_bytes(bytes, "corrupt.gguf");
    ADD_FAILURE() << "no error; expected: " << *needles.begin();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("corrupt.gguf"), std::string::npos) << msg;
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }
}

template <class T>
std::vector<uint8_t> patched(size_t at, T v) {
  Layout L;
  std::vector<uint8_t> b = small_file(L);
  std::memcpy(b.data() + at, &v, sizeof(T));
  return b;
}

Layout layout() {
  Layout L;
  small_file(L);
  return L;
}

TEST(GgufCorrupt, BaselineIsValid) {
  Layout L;
  auto f = GgufFile::from_bytes(small_file(L));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int_array("test.arr"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f->tensor("b")->nbytes, 68u);
}

TEST(GgufCorrupt, HeaderFields) {
  const Layout L = layout();
  expect_error(patched<uint32_t>(L.magic, 0x46554748), {"bad magic"});
  expect_error(patched<uint32_t>(L.version, 1), {"unsupported GGUF version 1"});
  expect_error(patched<uint32_t>(L.version, 99), {"unsupported GGUF version 99"});
  expect_error(patched<uint32_t>(L.version, 0x03000000), {"big-endian"});
  expect_error(patched<uint64_t>(L.n_tensors, uint64_t{1} << 60), {"n_tensors", "exceeds"});
  expect_error(patched<uint64_t>(L.n_kv, ~uint64_t{0}), {"n_kv", "exceeds"});
  expect_error(std::vector<uint8_t>{'G', 'G'}, {"too small"});
  expect_error({}, {"too small"});
}

TEST(GgufCorrupt, Metadata) {
  const Layout L = layout();
  expect_error(patched<uint64_t>(L.arch_len, 999999),
               {"metadata key #0 'general.architecture'", "string length 999999 exceeds remaining"});
  expect_error(patched<uint64_t>(L.key0_len, uint64_t{1} << 62), {"metadata key #0", "key length"});
  expect_error(patched<uint32_t>(L.arch_type, 13), {"unknown value type 13"});
  expect_error(patched<uint32_t>(L.align_value, 0), {"general.alignment", "not a nonzero power of two"});
  expect_error(patched<uint32_t>(L.align_value, 3), {"general.alignment", "not a nonzero power of two"});
  expect_error(patched<uint32_t>(L.arr_elem_type, 77), {"'test.arr'", "unknown array element type 77"});
  expect_error(patched<uint64_t>(L.arr_len, uint64_t{1} << 40), {"'test.arr'", "array length"});
  expect_error(patched<uint64_t>(L.arr_len, 1000), {"'test.arr'", "array length 1000 exceeds"});
  // Two keys with the same name.
  Builder d;
  d.put<uint32_t>(0x46554747);
  d.put<uint32_t>(3);
  d.put<uint64_t>(0);
  d.put<uint64_t>(2);
  for (int k = 0; k < 2; ++k) {
    d.str("x.key");
    d.put<uint32_t>(4);
    d.put<uint32_t>(k);
  }
  expect_error(d.b, {"metadata key #1 'x.key'", "duplicate key"});
}

TEST(GgufCorrupt, NestedArraysTooDeep) {
  Builder d;
  d.put<uint32_t>(0x46554747);
  d.put<uint32_t>(3);
  d.put<uint64_t>(0);
  d.put<uint64_t>(1);
  d.str("deep");
  d.put<uint32_t>(9);
  for (int k = 0; k < 100; ++k) {  // array of array of array ...
    d.put<uint32_t>(9);
    d.put<uint64_t>(1);
  }
  d.b.resize(d.b.size() + 64, 0);
  expect_error(d.b, {"'deep'", "nested deeper"});
}

TEST(GgufCorrupt, TensorInfos) {
  const Layout L = layout();
  expect_error(patched<uint32_t>(L.t0_ndims, 9), {"tensor #0 'a'", "n_dims 9"});
  expect_error(patched<uint32_t>(L.t0_ndims, 0), {"tensor #0 'a'", "n_dims 0"});
  expect_error(patched<uint64_t>(L.t0_ne0, 0), {"tensor #0 'a'", "dimension 0 = 0"});
  expect_error(patched<uint64_t>(L.t0_ne0, ~uint64_t{0}), {"tensor #0 'a'", "dimension 0"});
  expect_error(patched<uint64_t>(L.t0_ne0, uint64_t{1} << 62), {"tensor #0 'a'", "overflow"});
  expect_error(patched<uint32_t>(L.t0_type, 99), {"tensor #0 'a'", "unknown tensor type id 99"});
  // The internal layouts (GgmlType::Q4_K_X16, ...) are never a file's.
  const std::string internal = "unknown tensor type id " + std::to_string(uint32_t(GgmlType::Q4_K_X16));
  expect_error(patched<uint32_t>(L.t0_type, uint32_t(GgmlType::Q4_K_X16)), {"tensor #0 'a'", internal.c_str()});
  expect_error(patched<uint64_t>(L.t1_ne0, 48), {"tensor #1 'b'", "not a multiple of the block size 32"});
  expect_error(patched<uint64_t>(L.t1_offset, 4096), {"tensor #1 'b'", "outside the file"});
  expect_error(patched<uint64_t>(L.t1_offset, ~uint64_t{0} - 31), {"tensor #1 'b'", "outside the file"});
  expect_error(patched<uint64_t>(L.t1_offset, 100), {"tensor #1 'b'", "not a multiple of the alignment 32"});
  expect_error(patched<uint64_t>(L.t1_offset, 224), {"overlaps"});
  expect_error(patched<uint64_t>(L.t1_name, 9999), {"tensor #1", "tensor name length 9999 exceeds"});
  std::vector<uint8_t> dup = patched<uint8_t>(L.t1_name + 8, 'a');
  expect_error(dup, {"tensor #1 'a'", "duplicate tensor name"});
}

TEST(GgufCorrupt, EveryPrefixOfSmallFile) {
  // Every prefix of the small file fails cleanly (the file has no trailing padding
  // after the last tensor, so every proper prefix is invalid).
  Layout L;
  const std::vector<uint8_t> full = small_file(L);
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> part(full.begin(), full.begin() + n);
    EXPECT_THROW(GgufFile::from_bytes(part, "t"), Error) << "prefix " << n;
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

TEST(GgufCorrupt, TruncatedRealModel) {
  const std::string path = test::shared_dir() + "/models/stories260K.gguf";
  const std::vector<uint8_t> full = read_file(path);
  ASSERT_GT(full.size(), 100000u);
  auto f = GgufFile::from_bytes(full);
  uint64_t data_end = 0;  // end of the last tensor's bytes (trailing padding is optional)
  for (const GgufTensorInfo& t : f->tensors())
    data_end = std::max(data_end, f->data_offset() + t.offset + t.nbytes);
  ASSERT_LE(data_end, full.size());
  std::vector<size_t> cuts;
  for (size_t n = 0; n < f->data_offset() + 64; n += (n < 4096 ? 1 : 7)) cuts.push_back(n);
  for (size_t n = f->data_offset() + 64; n < data_end; n += 4093) cuts.push_back(n);
  cuts.push_back(data_end - 1);
  for (size_t n : cuts) {
    std::vector<uint8_t> part(full.begin(), full.begin() + n);
    try {
      GgufFile::from_bytes(std::move(part), "cut.gguf");
      ADD_FAILURE() << "truncation at " << n << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.gguf"), std::string::npos);
    }
  }
}

TEST(GgufCorrupt, TruncatedFileOnDisk) {
  const std::vector<uint8_t> full = read_file(test::shared_dir() + "/models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  for (size_t n : {size_t{0}, size_t{3}, size_t{24}, size_t{1000}, full.size() - 1}) {
    const std::string p = dir + "/cut" + std::to_string(n) + ".gguf";
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(full.data()), n);
    try {
      GgufFile::open(p);
      ADD_FAILURE() << "truncation at " << n << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
  // Flip bytes in the header/metadata region; the parse may succeed (e.g. a flipped
  // character of a token) but must never crash.
  Layout L;
  const std::vector<uint8_t> full = small_file(L);
  uint64_t state = 12345;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> b = full;
    for (int k = 0; k < 3; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (state >> 33) % 200;
      b[at] ^= static_cast<uint8_t>(1u << ((state >> 20) & 7));
    }
    try {
      GgufFile::from_bytes(b);
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace pc
