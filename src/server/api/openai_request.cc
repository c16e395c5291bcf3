#include "server/api/openai_request.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/approximate/recompute_policy.h"
#include "server/api/api_error.h"
#include "server/api/structured_output.h"

namespace pc::server {

namespace {

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double lo, double hi, double def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) throw bad_field(name, std::string("'") + name + "' must be a number", "invalid_type");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad_field(name, std::string("'") + name + "' must be between " + json(lo).dump() +
                              " and " + json(hi).dump() + ", got " + v->dump());
  return x;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number_integer() && !v->is_number_unsigned())
    throw bad_field(name, std::string("'") + name + "' must be an integer", "invalid_type");
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_field(name, std::string("'") + name + "' must be between " + std::to_string(lo) +
                              " and " + std::to_string(hi) + ", got " + v->dump());
  return x;
}

bool boolean(const json& body, const char* name, bool def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be a boolean", "invalid_type");
  return v->get<bool>();
}

ApiError unsupported(const char* name, const std::string& why) {
  return bad_field(name, std::string("'") + name + "' " + why, "unsupported_parameter");
}

// Fields whose effect the server cannot give: a 400 naming the field rather than an
// answer that silently ignores what the client asked for. Fields it accepts with no
// effect (store, metadata, service_tier, parallel_tool_calls, user, prompt_cache_key)
// and unknown ones are ignored, as llama-server and vLLM do (docs/api.md).
void reject_unsupported(const json& body) {
  for (const char* name : {"frequency_penalty", "presence_penalty"})
    if (number(body, name, -2, 2, 0) != 0)
      throw unsupported(name, "is not supported; use repetition_penalty");
  if (integer(body, "n", 1, INT32_MAX, 1) > 1) throw unsupported("n", "> 1 is not supported (one choice per request)");
  if (integer(body, "best_of", 1, INT32_MAX, 1) > 1) throw unsupported("best_of", "> 1 is not supported");
  if (boolean(body, "echo", false)) throw unsupported("echo", "is not supported");
  if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    throw unsupported("suffix", "is not supported (no fill-in-the-middle)");
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw bad_field("logit_bias", "'logit_bias' must be an object", "invalid_type");
    if (!lb->empty()) throw unsupported("logit_bias", "is not supported");
  }
}

// Completions have no tools: only the choices that ask for nothing are accepted there.
void reject_completion_tool_choice(const json& body) {
  if (const json* tc = field(body, "tool_choice"); tc && !(tc->is_string() && (*tc == "none" || *tc == "auto")))
    throw unsupported("tool_choice", "= " + tc->dump() + " applies to /v1/chat/completions (a completion has no tools)");
}

}  // namespace

namespace {

// Request bodies nest at most this deep (objects and arrays): the parser keeps its own
// stack, but serializing, comparing or rendering a value walks it recursively.
constexpr int kMaxBodyDepth = 256;

// The deepest nesting of objects and arrays in `text` (strings skipped), stopping early
// once it passes `limit`.
int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// Where a SAX parse stopped, as a field path ("max_tokens", "messages[2].content"): the
// parser's own error names the bad text but not the field it was the value of.
class FieldPathSax {
 public:
  using string_t = json::string_t;
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const string_t&) { return value(); }
  bool string(string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    frames_.back().key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.object) out += (out.empty() ? "" : ".") + f.key;
      else out += "[" + std::to_string(f.index) + "]";
    }
    return out;
  }

 private:
  struct Frame {
    bool object = true;
    std::string key;  // object: the member being parsed
    size_t index = 0; // array: the element being parsed
  };
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool open(bool object) {
    frames_.push_back({object, "", 0});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  std::vector<Frame> frames_;
};

}  // namespace

json parse_body(const std::string& body) {
  if (json_depth(body, kMaxBodyDepth) > kMaxBodyDepth)
    throw ApiError(400, "invalid_request_error",
                   "the JSON body nests objects and arrays more than " + std::to_string(kMaxBodyDepth) +
                       " levels deep",
                   "", "invalid_json");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::out_of_range& e) {
    // A number beyond a double's range (1e400): a bad value of a field, named.
    FieldPathSax sax;
    json::sax_parse(body, &sax);
    const std::string field = sax.path();
    throw bad_field(field, (field.empty() ? std::string("a number") : "'" + field + "'") +
                               " is out of range: " + e.what());
  } catch (const json::exception& e) {
    throw ApiError(400, "invalid_request_error", std::string("invalid JSON body: ") + e.what(), "",
                   "invalid_json");
  }
  if (!j.is_object())
    throw ApiError(400, "invalid_request_error", "the request body must be a JSON object", "",
                   "invalid_json");
  return j;
}

ReusePolicy parse_reuse(const json& body, ReusePolicy r) {
  if (auto m = body.find("cache_reuse"); m != body.end() && !m->is_null()) {
    if (!m->is_string() || (*m != "exact" && *m != "approximate"))
      throw bad_field("cache_reuse", "'cache_reuse' must be \"exact\" or \"approximate\"");
    r.mode = *m == "approximate" ? CacheReuse::kApproximate : CacheReuse::kExact;
  }
  if (auto p = body.find("cache_reuse_policy"); p != body.end() && !p->is_null()) {
    const auto pol = p->is_string() ? parse_recompute_policy(p->get<std::string>()) : std::nullopt;
    if (!pol) throw bad_field("cache_reuse_policy", "'cache_reuse_policy' must be \"prefix\", \"deviation\" or \"impact\"");
    r.policy = *pol;
  }
  if (auto b = body.find("cache_reuse_budget"); b != body.end() && !b->is_null()) {
    if (!b->is_number() || !(b->get<double>() >= 0 && b->get<double>() <= 1))
      throw bad_field("cache_reuse_budget", "'cache_reuse_budget' must be a number in [0, 1]");
    r.budget = b->get<double>();
  }
  if (auto b = body.find("cache_reuse_blocks"); b != body.end() && !b->is_null()) {
    if (!b->is_boolean()) throw bad_field("cache_reuse_blocks", "'cache_reuse_blocks' must be a boolean");
    r.report_blocks = b->get<bool>();
  }
  return r;
}

ToolChoice parse_tool_choice(const json& body, ToolFormat format) {
  ToolChoice tc;
  const json* v = field(body, "tool_choice");
  if (!v) return tc;
  if (v->is_string() && *v == "auto") return tc;
  if (v->is_string() && *v == "none") {
    tc.mode = ToolChoice::Mode::kNone;
    return tc;
  }
  if (v->is_string() && *v == "required") {
    tc.mode = ToolChoice::Mode::kRequired;
  } else if (v->is_object() && v->value("type", json()) == "function" && v->contains("function") &&
             (*v)["function"].is_object() && (*v)["function"].contains("name") && (*v)["function"]["name"].is_string()) {
    tc.mode = ToolChoice::Mode::kNamed;
    tc.name = (*v)["function"]["name"];
  } else {
    throw bad_field("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                                   "\"function\", \"function\": {\"name\": ...}}, got " + v->dump(), "invalid_value");
  }
  const json* tools = field(body, "tools");
  if (!tools || !tools->is_array() || tools->empty())
    throw bad_field("tool_choice", "'tool_choice' = " + v->dump() + " needs a non-empty 'tools'");
  if (tc.mode == ToolChoice::Mode::kNamed) {
    bool found = false;
    for (const json& t : *tools)
      if (t.is_object() && t.contains("function") && t["function"].is_object() &&
          t["function"].value("name", json()) == tc.name)
        found = true;
    if (!found) throw bad_field("tool_choice", "'tool_choice' names function '" + tc.name + "', which is not in 'tools'");
  }
  if (format == ToolFormat::kNone)
    throw unsupported("tool_choice", "= " + v->dump() + " cannot be enforced: the chat template renders no tool "
                                     "calls, so there is no call opener to start the reply with; use \"auto\" or \"none\"");
  return tc;
}

CommonParams parse_common(const json& body, bool chat, const RequestDefaults& d, std::string_view raw) {
  CommonParams p;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad_field("model", "'model' must be a string", "invalid_type");
    p.model = m->get<std::string>();
  }
  SamplingParams& s = p.gen.sampling;
  s.temperature = float(number(body, "temperature", 0, 2, d.temperature));
  s.top_p = float(number(body, "top_p", 0, 1, d.top_p));
  if (!(s.top_p > 0.f))  // would keep no token: the sampler takes top_p in (0, 1]
    throw bad_field("top_p", "'top_p' must be greater than 0 and at most 1 (1 = off), got " +
                                 body["top_p"].dump());
  s.top_k = int32_t(integer(body, "top_k", 0, INT32_MAX, d.top_k));
  s.min_p = float(number(body, "min_p", 0, 1, 0.0));
  s.repeat_penalty = float(number(body, "repetition_penalty", 0.01, 10, 1.0));
  s.repeat_penalty = float(number(body, "repeat_penalty", 0.01, 10, s.repeat_penalty));
  s.repeat_last_n = int32_t(integer(body, "repeat_last_n", 0, 1 << 20, s.repeat_last_n));
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad_field("seed", "'seed' must be an integer", "invalid_type");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
  } else if (d.seed) {
    s.seed = *d.seed;
  } else {
    s.seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  }
  reject_unsupported(body);
  if (!chat) reject_completion_tool_choice(body);
  p.gen.grammar = parse_output_constraint(body, raw);
  // Log-probabilities (TokenLogprobs: of the raw logits, before sampling settings).
  // Completions: "logprobs": N; chat: "logprobs": true with "top_logprobs": N.
  if (chat) {
    const int64_t top = integer(body, "top_logprobs", 0, 20, 0);
    if (boolean(body, "logprobs", false)) {
      p.gen.logprobs = int32_t(top);
    } else if (field(body, "top_logprobs")) {
      throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    }
  } else if (field(body, "logprobs")) {
    p.gen.logprobs = int32_t(integer(body, "logprobs", 0, 20, 0));
  }
  if (const json* t = field(body, "max_completion_tokens")) {
    p.gen.max_tokens = int32_t(integer(body, "max_completion_tokens", 0, INT32_MAX, 0));
    p.max_tokens_given = t != nullptr;
  } else if (field(body, "max_tokens")) {
    p.gen.max_tokens = int32_t(integer(body, "max_tokens", 0, INT32_MAX, 0));
    p.max_tokens_given = true;
  } else if (d.n_predict >= 0) {
    p.gen.max_tokens = d.n_predict;  // still clamped to the context later
  } else {
    p.gen.max_tokens = chat ? INT32_MAX : 16;  // chat: clamped to the context later
  }
  if (const json* st = field(body, "stop")) {
    if (st->is_string()) {
      p.stops.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      for (const json& x : *st) {
        if (!x.is_string()) throw bad_field("stop", "'stop' must be a string or an array of strings", "invalid_type");
        p.stops.push_back(x.get<std::string>());
      }
    } else {
      throw bad_field("stop", "'stop' must be a string or an array of strings", "invalid_type");
    }
    if (p.stops.size() > 16) throw bad_field("stop", "at most 16 stop strings");
  }
  p.gen.stop_at_eog = !boolean(body, "ignore_eos", false);
  p.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_field("stream_options", "'stream_options' must be an object", "invalid_type");
    p.include_usage = boolean(*so, "include_usage", false);
  }
  if (const json* salt = field(body, "cache_salt")) {
    if (!salt->is_string()) throw bad_field("cache_salt", "'cache_salt' must be a string", "invalid_type");
    p.cache_salt = salt->get<std::string>();
  }
  return p;
}

}  // namespace pc::server
