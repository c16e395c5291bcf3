// GGUF reader/writer: round trips through the writer, and the shared model and
// vocabulary files open with the metadata their READMEs state.
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "gguf/quants.h"
#include "test_util.h"

namespace pc {
namespace {

std::string model_path(const std::string& name) { return test::shared_dir() + "/models/" + name; }
std::string vocab_path(const std::string& name) { return test::shared_dir() + "/vocab/" + name; }

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A writer holding one value of every metadata type, nested arrays and three tensors.
GgufWriter full_writer() {
  GgufWriter w;
  w.set("t.u8", GgufValue::make_uint(GgufType::UINT8, 250));
  w.set("t.i8", GgufValue::make_int(GgufType::INT8, -100));
  w.set("t.u16", GgufValue::make_uint(GgufType::UINT16, 65000));
  w.set("t.i16", GgufValue::make_int(GgufType::INT16, -32000));
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_f32("t.f32", 0.25f);
  w.set_bool("t.bool", true);
  w.set_string("t.str", std::string("h\xc3\xa9llo\0x", 8));  // UTF-8 and an embedded NUL
  w.set_u64("t.u64", 0xfedcba9876543210ull);
  w.set("t.i64", GgufValue::make_int(GgufType::INT64, -(int64_t{1} << 60)));
  w.set("t.f64", GgufValue::make_float(GgufType::FLOAT64, 1.0 / 3.0));
  w.set_string_array("t.strs", {"a", "", "ccc"});
  w.set("t.floats", GgufValue::make_array(GgufType::FLOAT32,
                                          {GgufValue::make_float(GgufType::FLOAT32, 1.5),
                                           GgufValue::make_float(GgufType::FLOAT32, -2)}));
  w.set("t.empty", GgufValue::make_array(GgufType::INT32, {}));
  // [[1, 2], [], [3]] as an array of arrays of u16, and an array of arrays of strings.
  auto u16 = [](uint64_t v) { return GgufValue::make_uint(GgufType::UINT16, v); };
  w.set("t.nested", GgufValue::make_array(
                        GgufType::ARRAY, {GgufValue::make_array(GgufType::UINT16, {u16(1), u16(2)}),
                                          GgufValue::make_array(GgufType::UINT16, {}),
                                          GgufValue::make_array(GgufType::UINT16, {u16(3)})}));
  w.set("t.nested_str",
        GgufValue::make_array(GgufType::ARRAY, {GgufValue::make_array(
                                                   GgufType::STRING, {GgufValue::make_string("x")})}));
  std::vector<float> a(64);
  for (int i = 0; i < 64; ++i) a[i] = i * 0.5f - 3;
  w.add_tensor("a", GgmlType::F32, {32, 2}, f32_bytes(a));
  std::vector<uint8_t> q(2 * sizeof(BlockQ8_0));
  quantize_row(GgmlType::Q8_0, a.data(), q.data(), 64);
  w.add_tensor("b.q8", GgmlType::Q8_0, {64}, q);
  w.add_tensor("c", GgmlType::F16, {3, 1, 1, 2}, std::vector<uint8_t>(12, 0x3c));
  return w;
}

void check_full(const GgufFile& f) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("t.u8", 0), 250);
  EXPECT_EQ(f.get_int("t.i8", 0), -100);
  EXPECT_EQ(f.get_int("t.u16", 0), 65000);
  EXPECT_EQ(f.get_int("t.i16", 0), -32000);
  EXPECT_EQ(f.get_int("t.u32", 0), 4000000000ll);
  EXPECT_EQ(f.get_int("t.i32", 0), -2000000000);
  EXPECT_EQ(f.get_float("t.f32", 0), 0.25);
  EXPECT_TRUE(f.get_bool("t.bool", false));
  EXPECT_EQ(f.get_string("t.str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.find("t.u64")->u, 0xfedcba9876543210ull);
  EXPECT_THROW(f.get_int("t.u64", 0), Error);  // does not fit in int64
  EXPECT_EQ(f.get_int("t.i64", 0), -(int64_t{1} << 60));
  EXPECT_EQ(f.get_float("t.f64", 0), 1.0 / 3.0);
  EXPECT_EQ(f.get_string_array("t.strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_float_array("t.floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_TRUE(f.get_int_array("t.empty").empty());
  EXPECT_EQ(f.find("t.empty")->elem_type, GgufType::INT32);
  const GgufValue* n = f.find("t.nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->elem_type, GgufType::ARRAY);
  ASSERT_EQ(n->arr.size(), 3u);
  EXPECT_EQ(n->arr[0].arr.size(), 2u);
  EXPECT_EQ(n->arr[0].arr[1].u, 2u);
  EXPECT_EQ(n->arr[1].arr.size(), 0u);
  EXPECT_EQ(n->arr[2].arr[0].u, 3u);
  EXPECT_EQ(n->arr[2].elem_type, GgufType::UINT16);
  EXPECT_EQ(f.find("t.nested_str")->arr[0].arr[0].s, "x");
  EXPECT_EQ(f.find("t.nested")->to_string(), "[[1, 2], [], [3]]");

  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensorInfo* a = f.tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(a->nbytes, 256u);
  float first, last;
  std::memcpy(&first, a->data, 4);
  std::memcpy(&last, a->data + 252, 4);
  EXPECT_EQ(first, -3.0f);
  EXPECT_EQ(last, 63 * 0.5f - 3);
  const GgufTensorInfo* b = f.tensor("b.q8");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::Q8_0);
  EXPECT_EQ(b->nbytes, 68u);
  const GgufTensorInfo* c = f.tensor("c");
  EXPECT_EQ(c->n_elements(), 6);
  EXPECT_EQ(c->ne.size(), 4u);
  EXPECT_EQ(f.tensor("missing"), nullptr);
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
  EXPECT_EQ(f.tensor("b.q8")->data - a->data, static_cast<ptrdiff_t>(f.tensor("b.q8")->offset));
}

TEST(Gguf, RoundTripAllTypesInMemory) {
  std::vector<uint8_t> bytes = full_writer().to_bytes();
  auto f = GgufFile::from_bytes(bytes, "mem");
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  check_full(*f);
}

TEST(Gguf, RoundTripThroughFileIsAtomicAndIdentical) {
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/m.gguf";
  GgufWriter w = full_writer();
  {
    std::ofstream(path) << "old contents";
  }
  w.write(path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->path(), path);
  check_full(*f);
  // Same bytes as to_bytes, and no temp file left behind.
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(disk, w.to_bytes());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

TEST(Gguf, RoundTripAlignment64) {
  GgufWriter w = full_writer();
  w.set_u32("general.alignment", 64);
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  check_full(*f);
  for (const GgufTensorInfo& t : f->tensors()) EXPECT_EQ(t.offset % 64, 0u);
}

TEST(Gguf, WriterSetReplacesAndValidates) {
  GgufWriter w;
  w.set_u32("k", 1);
  w.set_string("k", "two");
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_EQ(f->metadata().size(), 1u);
  EXPECT_EQ(f->get_string("k"), "two");
  EXPECT_THROW(f->get_int("k", 0), Error);
  EXPECT_EQ(f->get_int("absent", 7), 7);
  EXPECT_TRUE(f->get_string_array("absent").empty());
  EXPECT_THROW(w.add_tensor("x", GgmlType::Q8_0, {16}, std::vector<uint8_t>(17)), Error);
  EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {4}, std::vector<uint8_t>(15)), Error);
  EXPECT_THROW(w.add_tensor("x", static_cast<GgmlType>(99), {4}, {}), Error);
  w.add_tensor("x", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {4}, std::vector<uint8_t>(16)), Error);
  w.set_u32("general.alignment", 24);
  EXPECT_THROW(w.to_bytes(), Error);
  EXPECT_THROW(w.write(test::temp_dir() + "/x.gguf"), Error);
  EXPECT_THROW(GgufWriter().write("/nonexistent-dir/x.gguf"), Error);
}

TEST(Gguf, OpenMissingFileNamesIt) {
  try {
    GgufFile::open("/nonexistent/file.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/file.gguf"), std::string::npos);
  }
}

TEST(Gguf, TypeTable) {
  EXPECT_EQ(ggml_type_name(GgmlType::Q4_K), "Q4_K");
  EXPECT_EQ(ggml_type_name(static_cast<GgmlType>(99)), "type#99");
  struct { GgmlType t; int64_t elems, bytes; } expect[] = {
      {GgmlType::F32, 1, 4},     {GgmlType::F16, 1, 2},     {GgmlType::Q4_0, 32, 18},
      {GgmlType::Q4_1, 32, 20},  {GgmlType::Q5_0, 32, 22},  {GgmlType::Q5_1, 32, 24},
      {GgmlType::Q8_0, 32, 34},  {GgmlType::Q8_1, 32, 36},  {GgmlType::Q2_K, 256, 84},
      {GgmlType::Q3_K, 256, 110}, {GgmlType::Q4_K, 256, 144}, {GgmlType::Q5_K, 256, 176},
      {GgmlType::Q6_K, 256, 210}, {GgmlType::Q8_K, 256, 292}, {GgmlType::I8, 1, 1},
      {GgmlType::I16, 1, 2},     {GgmlType::I32, 1, 4},     {GgmlType::I64, 1, 8},
      {GgmlType::F64, 1, 8},     {GgmlType::BF16, 1, 2},
  };
  for (auto& e : expect) {
    EXPECT_EQ(ggml_block_elems(e.t), e.elems) << ggml_type_name(e.t);
    EXPECT_EQ(ggml_block_bytes(e.t), e.bytes) << ggml_type_name(e.t);
  }
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q8_K), static_cast<int64_t>(sizeof(BlockQ8_K)));
  EXPECT_EQ(ggml_block_elems(static_cast<GgmlType>(4)), 0);  // removed Q4_2
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), 288);
  EXPECT_TRUE(ggml_type_supported(GgmlType::Q6_K));
  EXPECT_TRUE(ggml_type_supported(GgmlType::Q5_K));
  EXPECT_FALSE(ggml_type_supported(GgmlType::Q3_K));
}

// --- shared files -------------------------------------------------------------

TEST(GgufShared, Stories260K) {
  auto f = GgufFile::open(model_path("stories260K.gguf"));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count", 0), 5);
  EXPECT_EQ(f->get_int("llama.embedding_length", 0), 64);
  EXPECT_EQ(f->get_int("llama.feed_forward_length", 0), 172);
  EXPECT_EQ(f->get_int("llama.attention.head_count", 0), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv", 0), 4);
  EXPECT_EQ(f->get_int("llama.rope.dimension_count", 0), 8);
  EXPECT_EQ(f->get_int("llama.context_length", 0), 2048);
  EXPECT_NEAR(f->get_float("llama.attention.layer_norm_rms_epsilon", 0), 1e-5, 1e-9);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  auto scores = f->get_float_array("tokenizer.ggml.scores");
  ASSERT_EQ(scores.size(), 512u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), 512u);
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id", -1), 1);
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id", -1), 2);
  EXPECT_EQ(f->find("tokenizer.ggml.add_bos_token"), nullptr);
  const GgufTensorInfo* embd = f->tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{64, 512}));
  ASSERT_NE(f->tensor("output.weight"), nullptr);
  EXPECT_EQ(std::memcmp(embd->data, f->tensor("output.weight")->data, embd->nbytes), 0);
  for (const GgufTensorInfo& t : f->tensors()) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
  EXPECT_NE(f->tensor("blk.4.ffn_down.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk.4.ffn_down.weight")->ne, (std::vector<int64_t>{172, 64}));
}

TEST(GgufShared, TinyStories656KQ8_0) {
  auto f = GgufFile::open(model_path("TinyStories-656K-Q8_0.gguf"));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count", 0), 2);
  EXPECT_EQ(f->get_int("llama.embedding_length", 0), 128);
  EXPECT_EQ(f->get_int("llama.feed_forward_length", 0), 384);
  EXPECT_EQ(f->get_int("llama.attention.head_count", 0), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv", 0), 4);
  EXPECT_EQ(f->get_int("llama.context_length", 0), 512);
  EXPECT_NEAR(f->get_float("llama.attention.layer_norm_rms_epsilon", 0), 1e-6, 1e-10);
  EXPECT_NEAR(f->get_float("llama.rope.freq_base", 10000), 10000, 1e-3);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 2048u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")[1], "<|start_story|>");
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id", -1), 1);
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id", -1), 2);
  EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(f->tensor("output.weight"), nullptr);
  const GgufTensorInfo* embd = f->tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::Q8_0);
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{128, 2048}));
  EXPECT_EQ(f->tensor("output_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(f->tensor("blk.1.attn_q.weight")->type, GgmlType::Q8_0);
}

TEST(GgufShared, Llama2TinyRandom) {
  auto f = GgufFile::open(model_path("llama-2-tiny-random.gguf"));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count", 0), 1);
  EXPECT_EQ(f->get_int("llama.embedding_length", 0), 8);
  EXPECT_EQ(f->get_int("llama.feed_forward_length", 0), 32);
  EXPECT_EQ(f->get_int("llama.attention.head_count", 0), 2);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv", 2), 2);
  EXPECT_EQ(f->get_int("llama.context_length", 0), 4096);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")[15043], "\xe2\x96\x81Hello");
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight")->type, GgmlType::F16);
  EXPECT_EQ(f->tensor("output_norm.weight")->type, GgmlType::F32);
}

TEST(GgufShared, VocabFiles) {
  struct { const char* file; const char* model; const char* pre; size_t min_vocab; bool merges; } v[] = {
      {"ggml-vocab-llama-spm.gguf", "llama", nullptr, 32000, false},
      {"ggml-vocab-phi-3.gguf", "llama", nullptr, 32000, false},
      {"ggml-vocab-llama-bpe.gguf", "gpt2", "llama-bpe", 128000, true},
      {"ggml-vocab-qwen2.gguf", "gpt2", "qwen2", 151000, true},
      {"ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", 50257, true},
  };
  for (auto& e : v) {
    SCOPED_TRACE(e.file);
    auto f = GgufFile::open(vocab_path(e.file));
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), e.model);
    if (e.pre) {
      EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), e.pre);
    }
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    EXPECT_GE(tokens.size(), e.min_vocab);
    EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").size(), tokens.size());
    EXPECT_EQ(!f->get_string_array("tokenizer.ggml.merges").empty(), e.merges);
  }
}

}  // namespace
}  // namespace pc

namespace pc {
namespace {

// A file copied into memory (the default for models) reads exactly as the
// mapped file: same metadata, every tensor's bytes equal, and it says where it
// lives.
TEST(Gguf, CopiedIntoMemoryEqualsMapped) {
  for (const char* name : {"stories260K.gguf", "TinyStories-656K-Q8_0.gguf"}) {
    auto mapped = GgufFile::open(test::shared_dir() + "/models/" + name, Residency::kMap);
    auto copied = GgufFile::open(test::shared_dir() + "/models/" + name, Residency::kMemory);
    EXPECT_EQ(mapped->residency(), Residency::kMap);
    EXPECT_EQ(copied->residency(), Residency::kMemory) << name << " (small files always fit)";
    ASSERT_EQ(mapped->file_size(), copied->file_size());
    ASSERT_EQ(mapped->metadata().size(), copied->metadata().size());
    ASSERT_EQ(mapped->tensors().size(), copied->tensors().size());
    for (size_t i = 0; i < mapped->tensors().size(); ++i) {
      const GgufTensorInfo& a = mapped->tensors()[i];
      const GgufTensorInfo& b = copied->tensors()[i];
      EXPECT_EQ(a.name, b.name);
      ASSERT_EQ(a.nbytes, b.nbytes);
      EXPECT_NE(a.data, b.data);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name << " " << a.name;
    }
  }
}

// A file of several copy chunks (64 MiB each, here read by 2 threads) and a
// partial last one: every byte of the copy equals the mapped file's, so no
// chunk is skipped, read twice into the wrong place or cut short.
TEST(Gguf, CopyOfSeveralChunksEqualsMapped) {
  const std::string path = test::temp_dir() + "/big.gguf";
  const int64_t n = (int64_t(150) << 20) / 4 + 12345;  // ~150 MiB of F32: 3 chunks
  std::vector<uint8_t> data(size_t(n) * 4);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(data.data() + i, &x, 8);
  }
  {
    GgufWriter w;
    w.set_string("general.name", "big");
    w.add_tensor("big.weight", GgmlType::F32, {n}, data);
    w.write(path);
  }
  auto mapped = GgufFile::open(path, Residency::kMap);
  auto copied = GgufFile::open(path, Residency::kMemory, 2);
  ASSERT_EQ(copied->residency(), Residency::kMemory);
  ASSERT_GT(copied->file_size(), uint64_t(128) << 20);
  ASSERT_EQ(copied->tensors().size(), 1u);
  const GgufTensorInfo& t = copied->tensors()[0];
  ASSERT_EQ(t.nbytes, data.size());
  EXPECT_EQ(std::memcmp(t.data, data.data(), data.size()), 0);
  EXPECT_EQ(std::memcmp(copied->tensors()[0].data, mapped->tensors()[0].data, data.size()), 0);
  std::filesystem::remove(path);
}

// The copy in memory puts the tensors on cache lines wherever the header ends
// (GGUF aligns the data section to general.alignment, 32 by default, so a
// file's tensors may sit half a line off, and every 64-byte load of their
// weights would straddle two lines): files whose data sections start at each
// multiple of 8 within a line all give the large tensors at 64-byte addresses
// (a 32-byte tensor ahead of them, as a norm of 8 values, cannot be on a line
// too: the most bytes win), the bytes of the mapped file, and
// rewritable_bytes() still the first byte of the file's image.
TEST(Gguf, CopyPutsTheDataSectionOnACacheLine) {
  const std::string path = test::temp_dir() + "/aligned.gguf";
  std::vector<uint8_t> data(4096 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 131 + 7);
  std::set<uint64_t> starts;
  for (int pad = 0; pad < 8; ++pad) {
    {
      GgufWriter w;
      w.set_u32("general.alignment", 8);
      w.set_string("general.name", std::string(size_t(8 * pad + 1), 'x'));
      w.add_tensor("n.weight", GgmlType::F32, {8}, std::vector<uint8_t>(32, 1));
      w.add_tensor("a.weight", GgmlType::F32, {1024}, std::vector<uint8_t>(data.begin(), data.begin() + 4096));
      w.add_tensor("b.weight", GgmlType::F32, {2048}, std::vector<uint8_t>(data.begin() + 4096, data.end()));
      w.write(path);
    }
    auto mapped = GgufFile::open(path, Residency::kMap);
    auto copied = GgufFile::open(path, Residency::kMemory);
    ASSERT_EQ(copied->residency(), Residency::kMemory);
    starts.insert(copied->data_offset() % 64);
    ASSERT_EQ(copied->tensors().size(), 3u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copied->tensors()[1].data) % 64, 0u)
        << "data section at file offset " << copied->data_offset();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copied->tensors()[2].data) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copied->tensors()[0].data) % 64, 32u);
    EXPECT_EQ(copied->tensors()[0].data, copied->rewritable_bytes() + copied->data_offset());
    EXPECT_EQ(std::memcmp(copied->rewritable_bytes(), mapped->tensors()[0].data - mapped->data_offset(),
                          copied->file_size()),
              0);
  }
  EXPECT_EQ(starts.size(), 8u) << "the files' data sections start at every multiple of 8 within a line";
  std::filesystem::remove(path);
}

// A file cut short in its header, or empty, is an error naming the file in
// either residency (the header is parsed before any copy is made).
TEST(Gguf, TruncatedOrEmptyFileIsAnErrorInEitherResidency) {
  const std::string src = test::shared_dir() + "/models/stories260K.gguf";
  std::ifstream in(src, std::ios::binary);
  std::vector<char> head(200);
  in.read(head.data(), std::streamsize(head.size()));
  for (size_t bytes : {size_t(0), head.size()}) {
    const std::string path = test::temp_dir() + "/cut.gguf";
    std::ofstream(path, std::ios::binary).write(head.data(), std::streamsize(bytes));
    for (Residency r : {Residency::kMap, Residency::kMemory}) {
      try {
        GgufFile::open(path, r);
        ADD_FAILURE() << bytes << " bytes opened";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cut.gguf"), std::string::npos) << e.what();
      }
    }
    std::filesystem::remove(path);
  }
}

// Only a copy in memory can be rewritten in place (Model::repack_weights):
// rewritable_bytes() gives the copy's first byte, a write through it is what
// the tensor then reads, and a mapped file is never offered for writing.
TEST(Gguf, OnlyACopyInMemoryIsRewritten) {
  const std::string path = test::shared_dir() + "/models/stories260K.gguf";
  auto mapped = GgufFile::open(path, Residency::kMap);
  EXPECT_EQ(mapped->rewritable_bytes(), nullptr);
  auto copied = GgufFile::open(path, Residency::kMemory);
  ASSERT_EQ(copied->residency(), Residency::kMemory);
  uint8_t* bytes = copied->rewritable_bytes();
  ASSERT_NE(bytes, nullptr);
  const GgufTensorInfo& t = copied->tensors().back();
  ASSERT_GT(t.nbytes, 0u);
  uint8_t* p = bytes + (t.data - bytes);
  const uint8_t before = p[0];
  p[0] = static_cast<uint8_t>(before ^ 0xFF);
  EXPECT_EQ(t.data[0], static_cast<uint8_t>(before ^ 0xFF));
  EXPECT_EQ(mapped->tensors().back().data[0], before);
}

}  // namespace
}  // namespace pc
