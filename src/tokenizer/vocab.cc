#include "tokenizer/vocab.h"

#include <algorithm>

#include "gguf/gguf.h"

namespace pc {

namespace {

// Texts of tokens that end a turn in the chat formats we know, whether or not
// the file names them as EOS/EOT.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|end_of_text|>",
};

// gpt-oss (o200k_harmony): a reply is a sequence of messages whose headers are
// special tokens, and the server must see them to take the channels apart
// (server/chat/harmony.h): <|start|>, <|channel|>, <|message|> and <|constrain|>
// are text in a reply (user-defined). A reply ends at <|return|> (final answer) or
// <|call|> (a tool call); <|end|> ends one message, after which the model goes on
// (its analysis, then the answer), so it is no end of generation here.
void mark_harmony(Vocab& v) {
  auto id = [&](std::string_view t) {
    auto it = v.id_of.find(std::string(t));
    return it == v.id_of.end() ? -1 : it->second;
  };
  const int32_t channel = id("<|channel|>"), message = id("<|message|>"), call = id("<|call|>"), ret = id("<|return|>");
  if (channel < 0 || message < 0 || call < 0 || ret < 0) return;
  for (std::string_view t : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"})
    if (int32_t i = id(t); i >= 0) v.type[i] = TokenType::kUserDefined;
  v.eog[call] = v.eog[ret] = 1;
  if (int32_t end = id("<|end|>"); end >= 0) v.eog[end] = 0;
}

}  // namespace

Vocab Vocab::load(const GgufFile& f, bool spm, bool bpe_default_add_bos) {
  Vocab v;
  v.text = f.get_string_array("tokenizer.ggml.tokens");
  if (v.text.empty())
    throw Error(f.path() + ": tokenizer.ggml.tokens is missing or empty");
  const size_t n = v.text.size();
  if (n > static_cast<size_t>(INT32_MAX))
    throw Error(f.path() + ": tokenizer.ggml.tokens has too many entries");

  v.score = f.get_float_array("tokenizer.ggml.scores");
  if (v.score.empty()) v.score.assign(n, 0.0f);
  if (v.score.size() != n)
    throw Error(f.path() + ": tokenizer.ggml.scores has " + std::to_string(v.score.size()) +
                " entries, tokenizer.ggml.tokens " + std::to_string(n));

  const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != n)
    throw Error(f.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                " entries, tokenizer.ggml.tokens " + std::to_string(n));
  v.type.assign(n, TokenType::kNormal);
  for (size_t i = 0; i < types.size(); ++i) {
    // Values outside 1..6 (0 = "undefined" in older converters) read as normal.
    if (types[i] >= 1 && types[i] <= 6) v.type[i] = static_cast<TokenType>(types[i]);
  }

  v.id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) v.id_of[v.text[i]] = static_cast<int32_t>(i);

  // Ids are stored as u32, where "none" is often 0xFFFFFFFF: anything out of
  // range means "none".
  auto id_key = [&](const char* key, int64_t def) -> int32_t {
    const int64_t id = f.get_int(key, def);
    return id >= 0 && id < static_cast<int64_t>(n) ? static_cast<int32_t>(id) : -1;
  };
  v.bos = id_key("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  v.eos = id_key("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  v.unk = id_key("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  v.eot = id_key("tokenizer.ggml.eot_token_id", -1);
  v.eom = id_key("tokenizer.ggml.eom_token_id", -1);
  v.pad = id_key("tokenizer.ggml.padding_token_id", -1);
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm || bpe_default_add_bos);
  v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = spm && f.get_bool("tokenizer.ggml.add_space_prefix", true);

  v.eog.assign(n, 0);
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog[id] = 1;
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = v.type[i];
    if (t != TokenType::kControl && t != TokenType::kUserDefined) continue;
    for (std::string_view e : kEogTexts)
      if (v.text[i] == e) v.eog[i] = 1;
  }
  mark_harmony(v);

  for (size_t i = 0; i < n; ++i) {
    const TokenType t = v.type[i];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !v.text[i].empty())
      v.specials.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(v.specials.begin(), v.specials.end(), [&](int32_t a, int32_t b) {
    return v.text[a].size() > v.text[b].size();
  });
  return v;
}

std::vector<Vocab::Fragment> Vocab::partition(std::string_view input, bool parse_special) const {
  std::vector<Fragment> frags;
  if (input.empty()) return frags;
  frags.push_back({-1, input});
  std::vector<Fragment> next;
  for (int32_t id : specials) {
    if (!parse_special && type[id] != TokenType::kUserDefined) continue;
    const std::string& t = text[id];
    // Most special texts never occur: one scan of the input rules them out
    // without rebuilding the fragment list.
    if (input.find(t) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.id >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = fr.raw.find(t, pos)) != std::string_view::npos; pos = hit + t.size()) {
        if (hit > pos) next.push_back({-1, fr.raw.substr(pos, hit - pos)});
        next.push_back({id, {}});
      }
      if (pos < fr.raw.size()) next.push_back({-1, fr.raw.substr(pos)});
    }
    frags.swap(next);
  }
  return frags;
}

void VocabTokenizer::encode_fragments(std::string_view text, bool parse_special, bool after_special,
                                      std::vector<int32_t>& out) const {
  for (const Vocab::Fragment& fr : v_.partition(text, parse_special)) {
    if (fr.id >= 0) {
      out.push_back(fr.id);
      after_special = true;
    } else {
      encode_raw(fr.raw, after_special, out);
      after_special = false;
    }
  }
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && v_.add_bos && v_.bos >= 0) out.push_back(v_.bos);
  encode_fragments(text, parse_special, /*after_special=*/true, out);
  if (add_special && v_.add_eos && v_.eos >= 0) out.push_back(v_.eos);
  return out;
}

std::vector<int32_t> VocabTokenizer::encode_continuation(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  encode_fragments(text, parse_special, /*after_special=*/false, out);
  return out;
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= v_.n())
    throw Error("token id " + std::to_string(id) + " out of range [0, " +
                std::to_string(v_.n()) + ")");
  return v_.text[id];
}

}  // namespace pc
