// The llama-server routes that its users' tools expect: POST /tokenize, POST
// /detokenize, POST /apply-template and GET /props. Shapes follow llama-server's
// (tools/server/README.md there); with API keys each needs one, like /v1/*.
#include <string_view>

#include "server/api/api_error.h"
#include "server/generation.h"
#include "server/api/openai.h"
#include "server/state.h"
#include "tokenizer/tokenizer.h"

namespace pc::server {

namespace {

// "promptcache VERSION (compiler)"; VERSION as `promptcache --version` prints it.
constexpr const char* kBuildInfo = "promptcache 0.1.0 (" __VERSION__ ")";

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (n < 0 || i + size_t(n) >= s.size()) return false;
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (int k = 1; k <= n; ++k) {
      const unsigned char d = s[i + k];
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// What a token spells: its bytes, or for a control token (BOS, <|im_start|>) its
// vocabulary text, as llama-server shows them.
std::string piece_of(const Tokenizer& tok, int32_t id) {
  return tok.is_control(id) ? tok.token_text(id) : tok.token_to_piece(id);
}

bool flag(const json& body, const char* name, bool def) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be a boolean", "invalid_type");
  return it->get<bool>();
}

// {"content": "...", "add_special": false, "parse_special": true, "with_pieces": false}
//   → {"tokens": [ids]} or, with pieces, {"tokens": [{"id", "piece"}]} where the piece
//   is a string when its bytes are valid UTF-8 and an array of byte values otherwise.
void tokenize(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  st.tenant_of(req);
  auto it = body.find("content");
  if (it == body.end() || !it->is_string())
    throw bad_field("content", "'content' must be a string",
                    it == body.end() ? "missing_required_parameter" : "invalid_type");
  const Tokenizer& tok = st.model->tokenizer();
  const std::vector<int32_t> ids =
      tok.encode(it->get<std::string>(), flag(body, "add_special", false), flag(body, "parse_special", true));
  json tokens = json::array();
  const bool pieces = flag(body, "with_pieces", false);
  for (int32_t id : ids) {
    if (!pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string p = piece_of(tok, id);
    json bytes = json::array();
    if (!valid_utf8(p))
      for (unsigned char c : p) bytes.push_back(int(c));
    tokens.push_back({{"id", id}, {"piece", bytes.empty() ? json(p) : bytes}});
  }
  send_json(res, 200, {{"tokens", tokens}});
}

// {"tokens": [ids]} → {"content": "..."}: the text decode() gives (no SentencePiece
// space prefix at the start), control tokens as their vocabulary text.
void detokenize(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  st.tenant_of(req);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array())
    throw bad_field("tokens", "'tokens' must be an array of token ids",
                    it == body.end() ? "missing_required_parameter" : "invalid_type");
  const Tokenizer& tok = st.model->tokenizer();
  const int64_t V = tok.n_vocab();
  std::string text;
  std::vector<int32_t> run;  // text tokens since the last control token
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
      throw bad_field("tokens", "token ids must be integers in [0, " + std::to_string(V) + ")");
    const int32_t id = t.get<int32_t>();
    if (!tok.is_control(id)) {
      run.push_back(id);
      continue;
    }
    // A text fragment after a control token is encoded as an input of its own.
    text += tok.decode(run) + tok.token_text(id);
    run.clear();
  }
  text += tok.decode(run);
  send_json(res, 200, {{"content", text}});
}

// {"messages": [...], "tools", "chat_template_kwargs", "add_generation_prompt",
// "continue_final_message", ...} → {"prompt": "..."}: the text a chat request renders
// (before tokenization), generation prompt included unless the body says otherwise.
void apply_template(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  st.tenant_of(req);
  check_messages(body);
  check_tools(body);
  const ChatTemplate& tmpl = chat_template_of(st);
  json sent = body["messages"];
  st.volatile_rules.apply(sent);  // as a chat request renders it
  const json messages = parse_tool_arguments(template_messages(sent));
  const ChatRender mode = parse_chat_render(body, messages);
  send_json(res, 200, {{"prompt", render_chat(tmpl, messages, chat_extra(body), mode, /*spans=*/false).text}});
}

// Server properties, loosely llama-server's /props shape; promptcache's own under
// "promptcache".
void props(Server::State& st, const HttpRequest& req, HttpResponse& res) {
  const std::string tenant = st.tenant_of(req);
  const Tokenizer& tok = st.model->tokenizer();
  // The defaults parse_common gives a request that sets nothing (no seed: a random one).
  const RequestDefaults& rd = st.opt.defaults;
  const CommonParams defaults = parse_common(json::object(), /*chat=*/false, rd);
  const SamplingParams& d = defaults.gen.sampling;
  const json params = {{"temperature", d.temperature},
                       {"top_k", d.top_k},
                       {"top_p", d.top_p},
                       {"min_p", d.min_p},
                       {"repeat_penalty", d.repeat_penalty},
                       {"repeat_last_n", d.repeat_last_n},
                       {"n_predict", rd.n_predict},  // -1: chat up to the context
                       {"max_tokens", defaults.gen.max_tokens},  // completions
                       {"seed", rd.seed ? json(*rd.seed) : json(-1)},  // -1: random per request
                       {"n_probs", 0},
                       {"stream", false}};
  const ServerOptions& o = st.opt;
  json j = {{"model_path", o.model_path},
            {"model_alias", st.model_id},
            {"n_ctx", st.n_ctx},
            {"total_slots", o.parallel},
            {"chat_template", st.chat_template ? json(st.chat_template->source()) : json(nullptr)},
            {"chat_template_source",
             st.chat_template_origin.empty() ? json(nullptr) : json(st.chat_template_origin)},
            {"bos_token", tok.bos() >= 0 ? json(tok.token_text(tok.bos())) : json(nullptr)},
            {"eos_token", tok.eos() >= 0 ? json(tok.token_text(tok.eos())) : json(nullptr)},
            {"build_info", kBuildInfo},
            {"modalities", {{"vision", false}, {"audio", false}}},
            {"default_generation_settings", {{"n_ctx", st.n_ctx}, {"params", params}}},
            {"promptcache",
             {{"kv_tokens", st.kv_tokens},
              {"admission_tokens", st.scheduler->admission_tokens(tenant)},
              {"queue", o.queue},
              {"prefix_cache", o.prefix_cache},
              {"any_model", o.any_model},
              {"cors_origin", o.cors_origin.empty() ? json(nullptr) : json(o.cors_origin)},
              {"api_keys", !st.api_keys.empty()}}}};
  send_json(res, 200, j);
}

}  // namespace

void add_llama_routes(Server::State& st) {
  auto route = [&st](auto fn) { return guarded(st, fn); };
  add_route(st, "POST", "/tokenize", route(tokenize));
  add_route(st, "POST", "/detokenize", route(detokenize));
  add_route(st, "POST", "/apply-template", route(apply_template));
  add_route(st, "GET", "/props", route(props));
}

}  // namespace pc::server
