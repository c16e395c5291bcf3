#include "tokenizer/tokenizer.h"

#include "gguf/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/unicode.h"

namespace pc {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  if (!f.find("tokenizer.ggml.model"))
    throw Error(f.path() + ": no tokenizer (tokenizer.ggml.model missing)");
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    return std::make_unique<SpmTokenizer>(Vocab::load(f, /*spm=*/true, false));
  }
  if (model == "gpt2") {
    // A file without tokenizer.ggml.pre predates the key: GPT-2's own regex.
    const std::string pre = f.get_string("tokenizer.ggml.pre", "gpt-2");
    auto pretok = PreTokenizer::create(pre);  // throws for names we do not know
    const bool llama3 = pre == "llama-bpe" || pre == "llama3";
    const std::vector<std::string> merges = f.get_string_array("tokenizer.ggml.merges");
    if (merges.empty()) throw Error(f.path() + ": tokenizer.ggml.merges is missing or empty");
    // Llama 3 adds BOS and takes whole-word vocabulary matches before merging
    // (its tokenizer.json sets ignore_merges).
    return std::make_unique<BpeTokenizer>(Vocab::load(f, /*spm=*/false, llama3), merges,
                                          std::move(pretok), llama3);
  }
  throw Error(f.path() + ": unsupported tokenizer model (tokenizer.ggml.model): \"" + model + "\"");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool strip = strips_space_prefix();
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id);
    // The prefix sits on the first text token, after any leading BOS/control ids.
    if (strip && !is_control(id)) {
      if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id);
  const size_t n = unicode::complete_utf8_prefix(pending_);
  std::string ready = pending_.substr(0, n);
  pending_.erase(0, n);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace pc
