#include "server/chat/reasoning.h"

#include <algorithm>

namespace pc::server {

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek") return ReasoningFormat::kDeepSeek;
  if (name == "auto") return ReasoningFormat::kAuto;
  return std::nullopt;
}

const char* reasoning_format_name(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kDeepSeek: return "deepseek";
    case ReasoningFormat::kAuto: return "auto";
  }
  return "auto";
}

ThinkTags detect_think_tags(std::string_view source) {
  if (source.find("<think>") != std::string_view::npos && source.find("</think>") != std::string_view::npos)
    return {"<think>", "</think>"};
  return {};
}

bool prompt_opens_thinking(const ThinkTags& tags, std::string_view prompt) {
  if (tags.empty()) return false;
  const size_t open = prompt.rfind(tags.open);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(tags.close);
  return close == std::string_view::npos || close < open;
}

ReasoningParser::ReasoningParser(ThinkTags tags, bool starts_inside)
    : tags_(std::move(tags)), state_(starts_inside ? State::kInside : State::kStart) {}

// Moves decided text out of buf_ for the current state, changing state at tags.
void ReasoningParser::step(ReasoningSplit& out, bool end) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        // Whitespace, then the open tag: a thinking block; anything else: all content.
        size_t i = 0;
        while (i < buf_.size() && is_space(buf_[i])) ++i;
        const std::string_view rest = std::string_view(buf_).substr(i);
        if (rest.size() >= tags_.open.size() && rest.substr(0, tags_.open.size()) == tags_.open) {
          buf_.erase(0, i + tags_.open.size());
          state_ = State::kInside;
          continue;
        }
        if (!end && tags_.open.compare(0, rest.size(), rest) == 0) return;  // undecided
        state_ = State::kContent;
        continue;
      }
      case State::kInside: {
        if (!reasoning_started_) {  // the reasoning's leading whitespace is dropped
          size_t i = 0;
          while (i < buf_.size() && is_space(buf_[i])) ++i;
          buf_.erase(0, i);
        }
        const size_t close = buf_.find(tags_.close);
        size_t take = close != std::string::npos ? close
                      : end                      ? buf_.size()
                                                 : buf_.size() - partial_tag_suffix(buf_, tags_.close);
        // Trailing whitespace waits: before the close tag it is dropped.
        size_t keep = take;
        while (keep > 0 && is_space(buf_[keep - 1])) --keep;
        if (close == std::string::npos && !end) take = keep;
        out.reasoning.append(buf_, 0, keep);
        if (keep > 0) reasoning_started_ = true;
        if (close != std::string::npos) {
          buf_.erase(0, close + tags_.close.size());
          state_ = State::kAfter;
          continue;
        }
        buf_.erase(0, end ? buf_.size() : take);
        return;
      }
      case State::kAfter: {
        // The answer's leading whitespace is dropped.
        size_t i = 0;
        while (i < buf_.size() && is_space(buf_[i])) ++i;
        buf_.erase(0, i);
        if (buf_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content += buf_;
        buf_.clear();
        return;
    }
  }
}

ReasoningSplit ReasoningParser::push(std::string_view text) {
  ReasoningSplit out;
  buf_.append(text);
  step(out, /*end=*/false);
  return out;
}

ReasoningSplit ReasoningParser::next(std::string_view text, bool done) {
  ReasoningSplit out = push(text);
  if (done) {
    ReasoningSplit rest = finish();
    out.reasoning += rest.reasoning;
    out.content += rest.content;
  }
  return out;
}

ReasoningSplit ReasoningParser::finish() {
  ReasoningSplit out;
  step(out, /*end=*/true);
  return out;
}

ReasoningSplit split_reasoning(const ThinkTags& tags, bool starts_inside, std::string_view text) {
  ReasoningParser p(tags, starts_inside);
  ReasoningSplit a = p.push(text);
  ReasoningSplit b = p.finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace pc::server
