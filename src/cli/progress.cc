#include "cli/progress.h"

#include <unistd.h>

namespace pc::cli {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Progress::Progress(std::string label, int64_t total, FILE* out)
    : Progress(std::move(label), total, out, ::isatty(::fileno(out)) == 1) {}

Progress::Progress(std::string label, int64_t total, FILE* out, bool shown)
    : label_(std::move(label)), total_(total), out_(out), shown_(shown), start_(Clock::now()) {}

void Progress::set(int64_t done, const std::string& detail) {
  done_ = done;
  detail_ = detail;
  if (!shown_ || finished_) return;
  const Clock::time_point now = Clock::now();
  const bool last = total_ > 0 && done_ >= total_;
  if (drawn_ && !last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
  std::string count = std::to_string(done_);
  if (total_ > 0) count += "/" + std::to_string(total_) + " (" + std::to_string(100 * done_ / total_) + "%)";
  std::fprintf(out_, "\r%s: %s%s%s, %.0f s\033[K", label_.c_str(), count.c_str(), detail_.empty() ? "" : " ",
               detail_.c_str(), secs);
  std::fflush(out_);
  drawn_ = true;
}

void Progress::clear() {
  if (!shown_ || !drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

void Progress::done() {
  clear();
  finished_ = true;
}

}  // namespace pc::cli
