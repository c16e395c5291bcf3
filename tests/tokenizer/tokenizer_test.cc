// Tokenizer behaviour beyond the reference vectors: model files, special
// tokens, streaming, errors and speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pc {
namespace {

using Ids = std::vector<int32_t>;

// Sanitizer builds run several times slower; timing bounds scale by this.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
constexpr double kSlowdown = 5;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
constexpr double kSlowdown = 5;
#else
constexpr double kSlowdown = 1;
#endif
#else
constexpr double kSlowdown = 1;
#endif

// Tokenizers are loaded once per file: the large vocabularies take ~0.2 s.
const Tokenizer& load(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[rel];
  if (!t) {
    auto f = GgufFile::open(test::shared_dir() + "/" + rel);
    t = Tokenizer::from_gguf(*f);
  }
  return *t;
}
const Tokenizer& qwen2() { return load("vocab/ggml-vocab-qwen2.gguf"); }
const Tokenizer& llama_spm() { return load("vocab/ggml-vocab-llama-spm.gguf"); }
const Tokenizer& llama_bpe() { return load("vocab/ggml-vocab-llama-bpe.gguf"); }

TEST(Tokenizer, TinyStoriesNoByteTokensEqualScores) {
  const Tokenizer& t = load("models/TinyStories-656K-Q8_0.gguf");
  EXPECT_EQ(t.n_vocab(), 2048);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.encode("Hello", true, false), (Ids{1, 80, 1288, 67}));
  EXPECT_EQ(t.encode("Once upon a time", true, false), (Ids{1, 80, 147, 201, 282, 57}));
  EXPECT_EQ(t.decode({1, 80, 147, 201, 282, 57}), "Once upon a time");
  EXPECT_TRUE(t.is_eog(2));
  // A character with no token and no byte tokens to spell it: the unknown token.
  const Ids ids = t.encode("\xE4\xB8\xAD", false, false);  // 中
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 0);
}

TEST(Tokenizer, Llama2TinyRandom) {
  const Tokenizer& t = load("models/llama-2-tiny-random.gguf");
  EXPECT_EQ(t.encode("Hello world", true, false), (Ids{1, 15043, 3186}));
  EXPECT_EQ(t.decode({1, 15043, 3186}), "Hello world");
  EXPECT_EQ(t.encode("", true, false), (Ids{1}));
  EXPECT_EQ(t.encode("", false, false), Ids{});
}

TEST(Tokenizer, Stories260KByteFallback) {
  const Tokenizer& t = load("models/stories260K.gguf");
  EXPECT_EQ(t.n_vocab(), 512);
  const std::string text = "Lily saw a \xF0\x9F\x98\x80 and said \xE4\xBD\xA0\xE5\xA5\xBD!";
  const Ids ids = t.encode(text, true, false);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(t.decode(ids), text);
}

TEST(Tokenizer, SpmPieces) {
  const Tokenizer& t = llama_spm();
  EXPECT_EQ(t.token_to_piece(15043), " Hello");  // "▁Hello"
  EXPECT_EQ(t.token_to_piece(1), "");            // <s>: control
  EXPECT_EQ(t.token_to_piece(3 + 0x41), "A");    // <0x41>
  EXPECT_EQ(t.token_to_piece(3 + 0xE4), "\xE4");
  EXPECT_THROW(t.token_to_piece(-1), Error);
  EXPECT_THROW(t.token_to_piece(t.n_vocab()), Error);
  // decode drops the space prefix once, after a leading BOS too, and keeps
  // the spaces that were in the text.
  EXPECT_EQ(t.decode(t.encode("  two spaces", true, false)), "  two spaces");
  EXPECT_EQ(t.decode({}), "");
}

TEST(Tokenizer, AddSpecialEosAndBos) {
  // llama-bpe: add_bos defaults to true (Llama 3); qwen2 has no add_bos key → none.
  EXPECT_TRUE(llama_bpe().add_bos());
  EXPECT_EQ(llama_bpe().encode("Hello", true, false).front(), 128000);
  EXPECT_FALSE(qwen2().add_bos());
  EXPECT_EQ(qwen2().encode("Hello", true, false), qwen2().encode("Hello", false, false));
}

TEST(Tokenizer, ParseSpecialQwen2) {
  const Tokenizer& t = qwen2();
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const Ids with = t.encode(text, false, true);
  const Ids user_nl_hi = t.encode("user\nhi", false, false);
  Ids expected{151644};
  expected.insert(expected.end(), user_nl_hi.begin(), user_nl_hi.end());
  expected.push_back(151645);
  EXPECT_EQ(with, expected);
  EXPECT_EQ(t.decode(with), "user\nhi");  // control tokens have no text

  const Ids without = t.encode(text, false, false);
  for (int32_t id : without) {
    EXPECT_NE(id, 151644);
    EXPECT_NE(id, 151645);
  }
  EXPECT_EQ(t.decode(without), text);  // tokenized as plain characters
  EXPECT_TRUE(t.is_eog(151645));        // <|im_end|>
  EXPECT_TRUE(t.is_eog(151643));        // <|endoftext|> (EOS)
  EXPECT_FALSE(t.is_eog(151644));
  EXPECT_TRUE(t.is_control(151644));
}

TEST(Tokenizer, ParseSpecialLlama3) {
  const Tokenizer& t = llama_bpe();
  const Ids ids = t.encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true, true);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[1], 128006);
  EXPECT_EQ(ids[3], 128007);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_TRUE(t.is_eog(128009));
  EXPECT_TRUE(t.is_eog(128001));
}

TEST(Tokenizer, ParseSpecialSpmAddsSpacePrefixAfterSpecial) {
  // As llama.cpp: a text fragment that follows a special token is prefixed
  // with a space like the start of the input.
  const Tokenizer& t = llama_spm();
  EXPECT_EQ(t.encode("</s>Hello", false, true), (Ids{2, 15043}));
  EXPECT_NE(t.encode("</s>Hello", false, false).front(), 2);
}

TEST(Tokenizer, SpmContinuationHasNoSpacePrefix) {
  // Text that continues earlier text (after a spliced reply) must not get the
  // space prefix of an input's start: "Hello" alone is "▁Hello", as the rest
  // of "Hi.Hello" it is "Hello"; after a special token the prefix returns.
  const Tokenizer& t = llama_spm();
  const Ids start = t.encode("Hello world", false, true);
  const Ids cont = t.encode_continuation("Hello world", true);
  ASSERT_FALSE(start.empty());
  ASSERT_FALSE(cont.empty());
  EXPECT_NE(start, cont);
  EXPECT_EQ(t.token_to_piece(start.front()).front(), ' ');
  EXPECT_NE(t.token_to_piece(cont.front()).front(), ' ');
  std::string text;
  for (int32_t id : cont) text += t.token_to_piece(id);
  EXPECT_EQ(text, "Hello world");
  // Split where no merge crosses the boundary: the pieces make the whole.
  Ids pieces = t.encode("Hi.", false, true);
  const Ids rest = t.encode_continuation(" Hello world", true);
  pieces.insert(pieces.end(), rest.begin(), rest.end());
  EXPECT_EQ(pieces, t.encode("Hi. Hello world", false, true));
  EXPECT_EQ(t.encode_continuation("</s>Hello", true), (Ids{2, 15043}));
  // Byte-level BPE has no prefix: both forms agree.
  EXPECT_EQ(qwen2().encode_continuation("Hello world", true), qwen2().encode("Hello world", false, true));
}

// Feeds ids one by one; every push must return whole UTF-8 characters only.
std::string stream(const Tokenizer& t, const Ids& ids, std::vector<std::string>* chunks) {
  StreamDecoder d(t);
  std::string out;
  for (int32_t id : ids) {
    std::string s = d.push(id);
    chunks->push_back(s);
    out += s;
  }
  out += d.flush();
  return out;
}

TEST(StreamDecoder, SpmByteTokensOfEmojiAndCjk) {
  const Tokenizer& t = llama_spm();
  // 😀 = F0 9F 98 80 has no token: four byte tokens.
  const Ids ids{3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 3 + 0xE4, 3 + 0xB8, 3 + 0xAD};
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(t, ids, &chunks), "\xF0\x9F\x98\x80\xE4\xB8\xAD");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80", "", "", "\xE4\xB8\xAD"}));
}

TEST(StreamDecoder, BpeSplitCharacter) {
  const Tokenizer& t = qwen2();
  const std::string text = "a\xF0\x9F\xA6\x99 \xE7\x8C\xAB\xE5\x92\xAA b";  // a🦙 猫咪 b
  const Ids ids = t.encode(text, false, false);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(t, ids, &chunks), text);
  // Each chunk on its own is complete UTF-8.
  for (const std::string& c : chunks) {
    size_t i = 0;
    while (i < c.size()) {
      const unsigned char b = c[i];
      const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      ASSERT_LE(i + len, c.size()) << "chunk ends inside a character";
      i += len;
    }
  }
}

TEST(StreamDecoder, FlushReturnsIncompleteTail) {
  const Tokenizer& t = llama_spm();
  StreamDecoder d(t);
  EXPECT_EQ(d.push(3 + 'x'), "x");
  EXPECT_EQ(d.push(3 + 0xE4), "");
  EXPECT_EQ(d.push(3 + 0xB8), "");
  EXPECT_EQ(d.flush(), "\xE4\xB8");
  EXPECT_EQ(d.flush(), "");
  // An invalid byte is not held back: no continuation can complete it.
  EXPECT_EQ(d.push(3 + 0xFF), "\xFF");
  EXPECT_EQ(d.push(3 + 0x80), "\x80");
}

// A minimal vocabulary file built in memory.
std::unique_ptr<GgufFile> make_vocab(const std::string& model, const std::string* pre) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", model);
  if (pre) w.set_string("tokenizer.ggml.pre", *pre);
  GgufValue toks;
  toks.type = GgufType::ARRAY;
  toks.elem_type = GgufType::STRING;
  for (const char* s : {"a", "b", "ab"}) {
    GgufValue v;
    v.type = GgufType::STRING;
    v.s = s;
    toks.arr.push_back(v);
  }
  w.set("tokenizer.ggml.tokens", toks);
  GgufValue merges;
  merges.type = GgufType::ARRAY;
  merges.elem_type = GgufType::STRING;
  GgufValue m;
  m.type = GgufType::STRING;
  m.s = "a b";
  merges.arr.push_back(m);
  w.set("tokenizer.ggml.merges", merges);
  return GgufFile::from_bytes(w.to_bytes());
}

void expect_error_naming(const GgufFile& f, const std::string& name) {
  try {
    Tokenizer::from_gguf(f);
    ADD_FAILURE() << "no error for " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, UnknownModelOrPreTokenizerIsAnError) {
  expect_error_naming(*make_vocab("wordpiece-xyz", nullptr), "wordpiece-xyz");
  const std::string bad_pre = "mystery-pre";
  expect_error_naming(*make_vocab("gpt2", &bad_pre), "mystery-pre");
}

// A gpt-oss-like vocabulary: the harmony header tokens are control tokens in the file.
std::unique_ptr<GgufFile> make_harmony_vocab(bool with_call) {
  GgufWriter w;
  w.set_string("general.architecture", "gpt-oss");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-4o");
  std::vector<std::string> texts = {"a", "b", "ab", "<|start|>", "<|channel|>", "<|message|>",
                                    "<|constrain|>", "<|end|>", "<|return|>"};
  if (with_call) texts.push_back("<|call|>");
  GgufValue toks, types;
  toks.type = types.type = GgufType::ARRAY;
  toks.elem_type = GgufType::STRING;
  types.elem_type = GgufType::INT32;
  for (size_t i = 0; i < texts.size(); ++i) {
    GgufValue v;
    v.type = GgufType::STRING;
    v.s = texts[i];
    toks.arr.push_back(v);
    GgufValue t;
    t.type = GgufType::INT32;
    t.i = i < 3 ? 1 : 3;  // normal, then control
    types.arr.push_back(t);
  }
  w.set("tokenizer.ggml.tokens", toks);
  w.set("tokenizer.ggml.token_type", types);
  GgufValue merges, m;
  merges.type = GgufType::ARRAY;
  merges.elem_type = m.type = GgufType::STRING;
  m.s = "a b";
  merges.arr.push_back(m);
  w.set("tokenizer.ggml.merges", merges);
  return GgufFile::from_bytes(w.to_bytes());
}

TEST(Tokenizer, HarmonyHeadersAreReplyTextAndEndIsNoEndOfGeneration) {
  auto f = make_harmony_vocab(true);
  auto t = Tokenizer::from_gguf(*f);
  // The headers a reply is parsed by come out as text...
  for (int32_t id : {3, 4, 5, 6}) EXPECT_EQ(t->token_to_piece(id), t->token_text(id));
  EXPECT_EQ(t->decode({4, 0, 5, 1}), "<|channel|>a<|message|>b");
  // ...a reply ends at <|return|> or <|call|>, not at <|end|> (one message ends there).
  EXPECT_FALSE(t->is_eog(7));
  EXPECT_TRUE(t->is_eog(8));
  EXPECT_TRUE(t->is_eog(9));
  EXPECT_EQ(t->token_to_piece(7), "");
  // Parsed from the prompt text as the special tokens they are.
  EXPECT_EQ(t->encode("<|start|>ab<|channel|>", false, true), (Ids{3, 2, 4}));
  // Without the harmony set (no <|call|>), nothing changes: <|end|> ends a turn (Phi-3).
  auto g = make_harmony_vocab(false);
  auto u = Tokenizer::from_gguf(*g);
  EXPECT_TRUE(u->is_eog(7));
  EXPECT_EQ(u->token_to_piece(4), "");
}

TEST(Tokenizer, MinimalBpeVocabFromMemory) {
  // No tokenizer.ggml.pre: GPT-2's regex.
  auto f = make_vocab("gpt2", nullptr);
  auto t = Tokenizer::from_gguf(*f);
  EXPECT_EQ(t->encode("abba", false, false), (Ids{2, 1, 0}));
  EXPECT_EQ(t->bos(), -1);
  EXPECT_EQ(t->encode("ab", true, false), (Ids{2}));  // no BOS to add
}

TEST(Tokenizer, MissingTokenizerIsAnError) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_THROW(Tokenizer::from_gguf(*f), Error);
}

// Long inputs must stay near-linear: ~100K characters, including one very long
// word with no pre-tokenizer split (release: ~0.1 s each; the bound leaves room
// for sanitizer builds and still catches quadratic behaviour).
TEST(Tokenizer, LongInputsAreFast) {
  std::string prose;
  while (prose.size() < 100000)
    prose += "The quick brown fox jumps over the lazy dog; \xE7\x8C\xAB 12345 don't stop!\n";
  const std::string one_word(100000, 'x');
  for (const Tokenizer* t : {&llama_spm(), &llama_bpe(), &qwen2(), &load("vocab/ggml-vocab-gpt-2.gguf")}) {
    for (const std::string* s : {static_cast<const std::string*>(&prose), &one_word}) {
      const auto t0 = std::chrono::steady_clock::now();
      const Ids ids = t->encode(*s, false, true);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(ms, 3000.0);
      EXPECT_EQ(t->decode(ids), *s);
    }
  }
  // A few KB, the interactive case: well under 10 ms (release: ~1 ms). Best of
  // 10 runs, so a busy machine does not fail the test.
  const std::string few_kb = prose.substr(0, 4000);
  for (const Tokenizer* t : {&llama_spm(), &llama_bpe(), &qwen2()}) {
    double best = 1e9;
    for (int i = 0; i < 10; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      t->encode(few_kb, true, true);
      best = std::min(best, std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0).count());
    }
    EXPECT_LT(best, 10.0 * kSlowdown);
  }
}

}  // namespace
}  // namespace pc
