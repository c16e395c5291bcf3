// A progress line for long commands (benches, make-model), on stderr and only when
// stderr is a terminal. Each update rewrites the one line in place ("\r", the text,
// then "erase to end of line"); done() erases it, leaving the terminal as it was.
// When stderr is a file or a pipe, nothing at all is written, so logs and captured
// output carry no control characters.
//
//   Progress p("prefill", runs);       // a label, and the steps in all (0: unknown)
//   for (...) { ...; p.step(); }       // or p.set(done, "detail")
//   p.clear(); std::printf(row);        // before writing to the terminal meanwhile
//   p.done();                           // (the destructor does it too)
//
// Redraws at most every 100 ms (the last step always): an update costs a clock read.
// Not thread-safe: one thread updates a Progress.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace pc::cli {

class Progress {
 public:
  // Shown when `out` is a terminal.
  Progress(std::string label, int64_t total, FILE* out = stderr);
  // Shown or not as `shown` says (for tests: a terminal is not needed).
  Progress(std::string label, int64_t total, FILE* out, bool shown);
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of the total steps are finished; `detail` follows the count.
  void set(int64_t done, const std::string& detail = "");
  void step(const std::string& detail = "") { set(done_ + 1, detail); }
  // Changes the total (e.g. once it is known).
  void set_total(int64_t total) { total_ = total; }
  // A (done, total) callback that updates this line, e.g. MakeModelOptions::on_progress.
  // Valid while this Progress lives.
  std::function<void(int64_t, int64_t)> reporter() {
    return [this](int64_t done, int64_t total) {
      set_total(total);
      set(done);
    };
  }
  // Erases the line; the next update draws it again.
  void clear();
  // Erases the line for good: later updates draw nothing.
  void done();
  bool shown() const { return shown_; }

 private:
  void draw();
  std::string label_;
  int64_t total_, done_ = 0;
  std::string detail_;
  FILE* out_;
  bool shown_, drawn_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace pc::cli
