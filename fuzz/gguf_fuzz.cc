// libFuzzer target: the GGUF reader on in-memory bytes (GgufFile::from_bytes),
// then everything a loader reads from the metadata: every value rendered, the
// typed getters on the keys the tokenizer and model config use, tensor views,
// and a tokenizer built from the metadata encoding and decoding a text. A
// corrupt file must be a pc::Error naming what was wrong, never a crash or an
// out-of-bounds read (the reader's promise, gguf.h). Seeds: fuzz/corpus/gguf/,
// written by fuzz/gguf_seeds.py.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

void read_metadata(const pc::GgufFile& f) {
  for (const auto& [key, value] : f.metadata()) (void)value.to_string();
  const char* keys[] = {"general.architecture", "general.alignment", "tokenizer.ggml.model",
                        "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                        "llama.context_length", "llama.embedding_length", "llama.rope.freq_base"};
  for (const char* k : keys) {
    try { (void)f.get_string(k); } catch (const pc::Error&) {}
    try { (void)f.get_int(k, 0); } catch (const pc::Error&) {}
    try { (void)f.get_float(k, 0); } catch (const pc::Error&) {}
    try { (void)f.get_bool(k, false); } catch (const pc::Error&) {}
    try { (void)f.get_string_array(k); } catch (const pc::Error&) {}
    try { (void)f.get_float_array(k); } catch (const pc::Error&) {}
    try { (void)f.get_int_array(k); } catch (const pc::Error&) {}
  }
}

// Every tensor's bytes lie inside the file: touch the first and last.
void read_tensors(const pc::GgufFile& f) {
  volatile uint8_t sink = 0;
  for (const pc::GgufTensorInfo& t : f.tensors()) {
    (void)t.n_elements();
    if (f.tensor(t.name) == nullptr) pc::fuzz::fail("tensor() does not find " + t.name);
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
}

void tokenize(const pc::GgufFile& f) {
  std::unique_ptr<pc::Tokenizer> tok;
  try {
    tok = pc::Tokenizer::from_gguf(f);
  } catch (const pc::Error&) {
    return;
  }
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok->encode("Hello world! <s> 12 ü\n", special, special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->n_vocab()) pc::fuzz::fail("encode() gave id " + std::to_string(id));
    (void)tok->decode(ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<pc::GgufFile> f;
  try {
    f = pc::GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
  } catch (const pc::Error&) {
    return 0;
  }
  read_metadata(*f);
  read_tensors(*f);
  tokenize(*f);
  return 0;
}
