#include "server/chat/harmony.h"

#include <nlohmann/json.hpp>

#include "server/chat/tool_call_scan.h"

namespace pc::server {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>"};
constexpr std::string_view kHeaders[] = {kStart, kChannel};
constexpr size_t kMaxHeader = 1024;  // a longer "header" is text, not harmony

// The word after `key` in a header, up to a space or a marker; "" when absent.
std::string header_field(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  size_t b = at + key.size(), e = b;
  while (e < header.size() && header[e] != ' ' && header[e] != '<' && header[e] != '\n') ++e;
  return std::string(header.substr(b, e - b));
}

}  // namespace

HarmonyParser::HarmonyParser(std::function<std::string()> new_id, bool calls)
    : new_id_(std::move(new_id)), calls_(calls) {}

// At pos_, no body open: reads a header "...<|message|>" and opens its body. False when
// the text does not reach the end of the header yet.
bool HarmonyParser::read_header(bool at_end) {
  const std::string_view s = buf_;
  const size_t m = s.find(kMessage, pos_);
  if (m == std::string_view::npos) {
    if (!at_end && s.size() - pos_ <= kMaxHeader) return false;
    body_ = Body::kContent;  // no header after all: text
    return true;
  }
  const std::string_view header = s.substr(pos_, m - pos_);
  const std::string channel = header_field(header, kChannel);
  std::string to = header_field(header, "to=");
  if (to.rfind("functions.", 0) == 0) to.erase(0, 10);
  if (channel == "analysis") body_ = Body::kReasoning;
  else if (!to.empty() && calls_) body_ = Body::kCall;
  else body_ = Body::kContent;
  call_name_ = std::move(to);
  call_args_.clear();
  pos_ = m + kMessage.size();
  return true;
}

void HarmonyParser::end_body(ToolParse& out) {
  if (body_ == Body::kCall) {
    size_t b = 0, e = call_args_.size();
    while (b < e && scan::is_ws(call_args_[b])) ++b;
    while (e > b && scan::is_ws(call_args_[e - 1])) --e;
    const std::string raw = call_args_.substr(b, e - b);
    const ojson args = raw.empty() ? ojson::object() : ojson::parse(raw, nullptr, false);
    if (args.is_object()) {
      ToolCall c;
      c.id = new_id_();
      c.name = call_name_;
      c.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
      out.calls.push_back(std::move(c));
    } else {
      out.content += call_args_;  // no call: what the model wrote stays visible
    }
  }
  body_ = Body::kNone;
  call_name_.clear();
  call_args_.clear();
}

void HarmonyParser::advance(bool at_end, ToolParse& out) {
  for (;;) {
    const std::string_view s = buf_;
    if (body_ == Body::kNone) {
      if (pos_ == s.size()) return;
      // Ends of an earlier message are dropped; a header opens the next body.
      bool undecided = false, header = false, ended = false;
      for (std::string_view e : kEnds) {
        size_t i = pos_;
        const scan::Got g = scan::expect(s, i, e);
        if (g == scan::Got::kDone) {
          pos_ = i;
          ended = true;
          break;
        }
        undecided = undecided || g == scan::Got::kMore;
      }
      if (ended) continue;
      for (std::string_view h : kHeaders) {
        size_t i = pos_;
        const scan::Got g = scan::expect(s, i, h, /*peek=*/true);
        header = header || g == scan::Got::kDone;
        undecided = undecided || g == scan::Got::kMore;
      }
      // The reply's first header may start with the recipient: " to=functions.f<|channel|>".
      if (pos_ == 0 && (s.rfind(" to=", 0) == 0 || s.rfind("to=", 0) == 0)) header = true;
      if (pos_ == 0 && !header && !at_end && (std::string_view(" to=").substr(0, s.size()) == s.substr(0, 4)))
        undecided = true;
      if (header) {
        if (!read_header(at_end)) return;
        continue;
      }
      if (undecided && !at_end) return;
      body_ = Body::kContent;  // text outside any message
      continue;
    }
    // Inside a body: up to the first marker that ends it.
    size_t stop = std::string_view::npos, skip = 0;
    for (std::string_view e : kEnds)
      if (size_t at = s.find(e, pos_); at < stop) stop = at, skip = e.size();
    for (std::string_view h : kHeaders)
      if (size_t at = s.find(h, pos_); at < stop) stop = at, skip = 0;
    size_t take = stop;
    if (stop == std::string_view::npos) {
      take = s.size();
      if (!at_end) {
        size_t hold = 0;
        for (std::string_view e : kEnds) hold = std::max(hold, scan::opener_prefix_at_end(s, pos_, e));
        for (std::string_view h : kHeaders) hold = std::max(hold, scan::opener_prefix_at_end(s, pos_, h));
        take = s.size() - hold;
      }
    }
    const std::string_view piece = s.substr(pos_, take - pos_);
    switch (body_) {
      case Body::kReasoning: out.reasoning.append(piece); break;
      case Body::kContent: out.content.append(piece); break;
      case Body::kCall: call_args_.append(piece); break;
      case Body::kNone: break;
    }
    pos_ = take;
    if (stop != std::string_view::npos) {
      pos_ = stop + skip;
      end_body(out);
      continue;
    }
    if (at_end) end_body(out);
    return;
  }
}

ToolParse HarmonyParser::push(std::string_view text) {
  ToolParse out;
  buf_.append(text);
  advance(false, out);
  return out;
}

ToolParse HarmonyParser::finish() {
  ToolParse out;
  advance(true, out);
  return out;
}

}  // namespace pc::server
