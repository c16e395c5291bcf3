#include "server/chat/text_stream.h"

#include <algorithm>
#include <utility>

namespace pc::server {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops)
    : tok_(tok), dec_(tok), stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::release(std::string s) {
  emitted_ += s;
  return s;
}

std::string TextStream::push(int32_t id) {
  if (stopped_) return "";
  ids_.push_back(id);
  const size_t prev = piece_end_.empty() ? 0 : piece_end_.back();
  piece_end_.push_back(prev + tok_.token_to_piece(id).size());
  held_ += dec_.push(id);
  if (stops_.empty()) return release(std::exchange(held_, {}));

  // Earliest complete stop string.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at < cut) {
      cut = at;
      matched_ = s;
    }
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return release(std::move(out));
  }
  // Hold back the longest tail that could still grow into a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return release(std::move(out));
}

std::string TextStream::finish() {
  if (stopped_) return "";
  std::string out = std::exchange(held_, {}) + dec_.flush();
  return release(std::move(out));
}

std::vector<int32_t> TextStream::ids_for_text(std::string* tail) const {
  size_t k = 0;
  while (k < ids_.size() && piece_end_[k] <= emitted_.size()) ++k;
  while (k > 0 && tok_.is_eog(ids_[k - 1])) --k;
  const size_t used = k ? piece_end_[k - 1] : 0;
  if (tail) *tail = emitted_.substr(used);
  return std::vector<int32_t>(ids_.begin(), ids_.begin() + k);
}

size_t TextStream::released_tokens(size_t known) const {
  size_t k = known;
  while (k < ids_.size() && token_offset(k) < emitted_.size()) ++k;
  return k;
}

}  // namespace pc::server
