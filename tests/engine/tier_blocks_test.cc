// Blocks in the KV tiers: a restarted engine over the same disk tier reuses a moved
// block approximately from the tier (its K stored rotated to position 0, rotated to
// the new position on reuse), close to what the same reuse from memory gives; blocks
// never cross namespaces, and an exact request after it is still bitwise cold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/cache_admin.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model_test_util.h"
#include "tokenizer/tokenizer.h"
#include "probe/engine_logits.h"

namespace pc {
namespace {

namespace fs = std::filesystem;

struct TierBlocks : ::testing::Test {
  std::unique_ptr<Model> model = Model::load(test::shared_model("stories260K.gguf"));
  std::vector<int32_t> sys = text(test::Story::kSys), a = text(test::Story::kA), b = text(test::Story::kB),
                       user = text(test::Story::kC);
  fs::path dir = fs::temp_directory_path() / ("pc-tier-blocks-" + std::to_string(::getpid()));

  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<int32_t> text(const std::string& s) { return model->tokenizer().encode(s, false, false); }
  std::unique_ptr<Engine> engine(bool disk) {
    TierOptions t;
    if (disk) {
      t.disk_dir = dir.string();
      t.disk_fsync = false;
    }
    return test::block_engine(*model, t);
  }
  GenerateRequest request(const std::vector<std::vector<int32_t>>& parts, CacheReuse mode = CacheReuse::kExact,
                          const std::string& tenant = "") {
    GenerateRequest r = test::block_request(model->tokenizer().bos(), parts, mode);
    r.scope = tenant;
    r.max_tokens = 1;
    return r;
  }
};

bool bitwise(const std::vector<float>& x, const std::vector<float>& y) {
  return !x.empty() && x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

float max_abs_diff(const std::vector<float>& x, const std::vector<float>& y) {
  float d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

TEST_F(TierBlocks, RestartedEngineReusesMovedBlocksFromDisk) {
  const auto first = request({sys, a, b, user});
  const std::vector<std::vector<int32_t>> moved = {b, a, user};
  {
    auto e = engine(true);
    e->generate(first);
  }  // destroyed: the write-through finishes first

  // The reference: the same approximate reuse from memory, and the full recomputation.
  std::vector<float> from_memory;
  GenerateResult mem;
  {
    auto e = engine(false);
    e->generate(first);
    from_memory = request_logits(*e, request(moved, CacheReuse::kApproximate), &mem);
  }
  const std::vector<float> full = request_logits(*engine(false), request(moved));
  ASSERT_GT(mem.n_approximate, 0);

  auto e = engine(true);
  // Another namespace finds nothing: block entries carry the tenant.
  GenerateResult other;
  request_logits(*e, request(moved, CacheReuse::kApproximate, "someone-else"), &other);
  EXPECT_EQ(other.n_approximate, 0);

  // The same exact prefix as in memory (the parts begin with the same token), so that the
  // same tokens are reused approximately.
  ASSERT_EQ(mem.n_cached, 2);
  e->generate(request({{b[0]}}));
  GenerateResult restarted;
  const std::vector<float> from_disk = request_logits(*e, request(moved, CacheReuse::kApproximate), &restarted);
  // The same tokens are reused as from memory, now from the disk tier.
  EXPECT_EQ(restarted.n_approximate, mem.n_approximate);
  EXPECT_EQ(restarted.n_cached, mem.n_cached);
  EXPECT_GE(restarted.n_approximate, int64_t(a.size() + b.size()) - 1);
  EXPECT_GT(e->cache().stats().tiers->totals.block_loads, 0);
  // Rotated to 0 and then to the new position rather than by the difference at once:
  // the same up to F16 rounding of the rotated keys, far below the approximation itself.
  const float approximation = max_abs_diff(from_memory, full);
  EXPECT_GT(approximation, 0.0f) << "an approximate reuse that changed nothing tests nothing";
  EXPECT_LT(max_abs_diff(from_disk, from_memory), 0.05f * approximation);

  // Exact requests never see it.
  EXPECT_TRUE(bitwise(request_logits(*e, request(moved)), full));
}

TEST_F(TierBlocks, ExactRequestsDoNotLookBlocksUp) {
  {
    auto e = engine(true);
    e->generate(request({sys, a, b, user}));
  }
  auto e = engine(true);
  GenerateResult r;
  request_logits(*e, request({sys, b, a, user}), &r);
  EXPECT_EQ(r.n_approximate, 0);
  EXPECT_EQ(e->cache().stats().tiers->totals.block_loads, 0);
}

}  // namespace
}  // namespace pc
