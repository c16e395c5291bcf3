// Hyperparameters that disagree with the file's tensors: an error naming the key
// before anything is allocated by them.
#include "model/config_check.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/error.h"
#include "model/config.h"
#include "model/make_model.h"
#include "model/model.h"
#include "test_util.h"

namespace pc {
namespace {

// A "micro" llama (1 block, n_embd 32, 2 heads, 1 KV head, ff 64) with the u32 value of
// metadata key `key` replaced by `value`.
std::string patched_model(const std::string& key, uint32_t value) {
  MakeModelOptions o;
  o.shape = "micro";
  o.vocab_path = test::shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
  o.n_vocab_limit = 512;
  const std::string path = test::temp_dir() + "/" + key + ".gguf";
  make_random_model(o, path);
  std::string bytes = test::read_file(path);
  // A key is its u64 length and its bytes, then its u32 type (4: UINT32) and value.
  std::string k(8, '\0');
  const uint64_t len = key.size();
  std::memcpy(k.data(), &len, 8);
  k += key;
  const size_t at = bytes.find(k);
  if (at == std::string::npos) throw std::runtime_error("no key " + key);
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + at + k.size(), 4);
  if (type != 4) throw std::runtime_error(key + " is not a u32");
  std::memcpy(bytes.data() + at + k.size() + 4, &value, 4);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a pc::Error: ") + e.what();
  }
  return "loaded";
}

TEST(ConfigCheck, AbsurdBlockCountNamesTheKey) {
  // A billion blocks: sizing the layers by it ran out of memory (std::bad_alloc).
  const std::string e = load_error(patched_model("llama.block_count", 1000000000));
  EXPECT_NE(e.find("metadata key 'llama.block_count' is 1000000000, but the file has tensors for 1 blocks "
                   "(blk.0 to blk.0)"),
            std::string::npos)
      << e;
}

TEST(ConfigCheck, SizesBeyondInt32NameTheKey) {
  const std::string e = load_error(patched_model("llama.context_length", 3000000000u));
  EXPECT_NE(e.find("metadata key 'llama.context_length' is 3000000000, beyond 2147483647"), std::string::npos) << e;
}

TEST(ConfigCheck, ShapesDisagreeingWithTensorsNameTheKey) {
  std::string e = load_error(patched_model("llama.attention.head_count", 1000000));
  EXPECT_NE(e.find("'llama.attention.head_count' is 1000000"), std::string::npos) << e;
  e = load_error(patched_model("llama.feed_forward_length", 1 << 30));
  EXPECT_NE(e.find("'llama.feed_forward_length' is 1073741824, but blk.0.ffn_up.weight has 64 outputs"),
            std::string::npos)
      << e;
  e = load_error(patched_model("llama.embedding_length", 64));
  EXPECT_NE(e.find("'llama.embedding_length' is 64, but token_embd.weight has rows of 32 values"), std::string::npos)
      << e;
}

TEST(ConfigCheck, ContextSizeIsCappedByTheModel) {
  ModelConfig c;
  c.arch_name = "llama";
  c.n_ctx_train = 2048;
  EXPECT_EQ(context_size(c, 0), 2048);
  EXPECT_EQ(context_size(c, 512), 512);
  try {
    context_size(c, 4096);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--ctx-size 4096 is beyond the model's context of 2048 positions "
                                         "(llama.context_length)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pc
