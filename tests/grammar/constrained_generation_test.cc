// Constrained decoding on a random-weight model: at temperature 1, with seeds, every
// output of 200 generated schemas parses and validates; cached and uncached runs of a
// request give the same tokens; a grammar-finished output stops by itself.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "grammar/response_format.h"
#include "model/make_model.h"
#include "model/model.h"
#include "schema_gen.h"
#include "schema_validator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

// A one-block random model with the first 1000 tokens of the Llama 2 vocabulary (the
// byte tokens and the commonest merges): fast steps, real multi-byte pieces.
const Model& micro_model() {
  static std::unique_ptr<Model> model = [] {
    MakeModelOptions o;
    o.shape = "micro";
    o.arch = "llama";
    o.type = GgmlType::F16;
    o.vocab_path = test::shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf";
    o.n_vocab_limit = 1000;
    o.seed = 11;
    const std::string path = test::temp_dir() + "/grammar-micro.gguf";
    make_random_model(o, path);
    return Model::load(path);
  }();
  return *model;
}

std::unique_ptr<Engine> engine_for(const Model& m) {
  EngineOptions eo;
  eo.threads = 1;
  eo.kv_memory_bytes = 64 << 20;
  return std::make_unique<Engine>(m, eo);
}

GenerateRequest request(const Model& m, std::shared_ptr<const grammar::Grammar> g, uint64_t seed) {
  GenerateRequest r;
  r.prompt = m.tokenizer().encode("Answer in JSON:", true, false);
  r.max_tokens = 2500;  // above the longest output any generated schema allows
  r.sampling.temperature = 1.f;
  r.sampling.seed = seed;
  r.grammar = std::move(g);
  return r;
}

std::string text_of(const Model& m, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    if (!m.tokenizer().is_eog(id)) s += m.tokenizer().token_to_piece(id);
  return s;
}

TEST(ConstrainedGeneration, TwoHundredSchemasParseAndValidate) {
  const Model& m = micro_model();
  auto engine = engine_for(m);
  int64_t tokens = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    const auto schema = grammar::test::random_schema(5000 + i);
    GenerateResult r = engine->generate(request(m, grammar::from_json_schema(schema), i));
    ASSERT_EQ(r.finish_reason, FinishReason::kStop) << schema.dump();
    tokens += int64_t(r.tokens.size());
    const std::string out = text_of(m, r.tokens);
    const nlohmann::json v = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << schema.dump() << "\n" << out;
    const nlohmann::json s = nlohmann::json::parse(schema.dump());
    EXPECT_EQ(grammar::test::validate(v, s, s), "") << schema.dump() << "\n" << out;
  }
  EXPECT_GT(tokens, 200 * 5);  // real outputs, not empty ones
}

TEST(ConstrainedGeneration, CachedAndUncachedGiveTheSameTokens) {
  const Model& m = micro_model();
  const auto g = grammar::from_json_schema(grammar::test::random_schema(77));
  auto warm = engine_for(m);
  const GenerateResult first = warm->generate(request(m, g, 3));
  const GenerateResult again = warm->generate(request(m, g, 3));  // prompt cached, automaton warm
  auto cold = engine_for(m);
  const GenerateResult fresh = cold->generate(request(m, grammar::from_json_schema(grammar::test::random_schema(77)), 3));
  EXPECT_GT(again.n_cached, 0);
  EXPECT_EQ(first.tokens, again.tokens);
  EXPECT_EQ(first.tokens, fresh.tokens);
}

TEST(ConstrainedGeneration, GbnfAndGreedy) {
  const Model& m = micro_model();
  auto engine = engine_for(m);
  GenerateRequest r = request(m, grammar::from_gbnf("root ::= (\"yes\" | \"no\") \", \" [0-9]{2}\n"), 1);
  r.sampling.temperature = 0.f;
  const GenerateResult got = engine->generate(r);
  const std::string out = text_of(m, got.tokens);
  EXPECT_EQ(got.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(out.size() == 6 && (out.rfind("yes", 0) == 0 || out.rfind("no", 0) == 0)) << out;
  // Without the grammar the same request says something else.
  r.grammar = nullptr;
  r.max_tokens = 8;
  EXPECT_NE(text_of(m, engine->generate(r).tokens), out);
}

TEST(ConstrainedGeneration, ForcedTokensMustObeyTheGrammar) {
  const Model& m = micro_model();
  auto engine = engine_for(m);
  GenerateRequest r = request(m, grammar::from_gbnf("root ::= \"a\"+\n"), 1);
  r.forced = m.tokenizer().encode("b", false, false);
  EXPECT_THROW(engine->generate(r), Error);
}

}  // namespace
}  // namespace pc
