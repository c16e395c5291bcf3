// The recurrent state of one sequence: what its Gated DeltaNet layers remember
// of the tokens before (LayerConfig::mixer kDeltaNet). It replaces per-token KV
// in those layers and has a fixed size, whatever the sequence's length.
//
//   per recurrent layer r (LayerConfig::state_index), contiguous:
//     conv  [d_conv - 1][channels]       the last d_conv - 1 qkv projections,
//                                         oldest first (zeros before the start)
//     delta [n_v_head][d_head][d_head]   S[j][r][c]: r over k, c over v
//
// n_tokens counts the tokens the state has absorbed: the forward pass accepts
// a sequence's entries only at slots n_tokens, n_tokens + 1, ... in batch order
// (a recurrence cannot skip or revisit a token). The per-token arithmetic is
// the same whichever batch or chunk a token is computed in (delta_net.cc), so a
// state saved after token t and restored continues bit for bit as a run that
// never stopped (snapshot() / restore()).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace pc {

class RecurrentState {
 public:
  RecurrentState() = default;
  // A zero state (the start of a sequence) for the model's recurrent layers.
  explicit RecurrentState(const ModelConfig& c)
      : conv_floats_((c.delta_net.d_conv - 1) * c.delta_net.channels()),
        delta_floats_(c.delta_net.n_v_head * c.delta_net.d_head * c.delta_net.d_head),
        data_(size_t(c.n_recurrent * (conv_floats_ + delta_floats_)), 0.f) {}
  RecurrentState(RecurrentState&&) = default;
  RecurrentState& operator=(RecurrentState&&) = default;
  // Copies are explicit (snapshot()): a state is megabytes on real shapes.
  RecurrentState(const RecurrentState&) = delete;
  RecurrentState& operator=(const RecurrentState&) = delete;

  bool empty() const { return data_.empty(); }
  int64_t n_tokens() const { return n_tokens_; }
  void advance(int64_t n) { n_tokens_ += n; }
  float* conv(int32_t layer) { return data_.data() + layer * (conv_floats_ + delta_floats_); }
  float* delta(int32_t layer) { return conv(layer) + conv_floats_; }
  // Back to the start of a sequence (zeros, no tokens).
  void reset() {
    std::fill(data_.begin(), data_.end(), 0.f);
    n_tokens_ = 0;
  }
  // A deep copy: the state after n_tokens() tokens.
  RecurrentState snapshot() const {
    RecurrentState s;
    s.conv_floats_ = conv_floats_;
    s.delta_floats_ = delta_floats_;
    s.data_ = data_;
    s.n_tokens_ = n_tokens_;
    return s;
  }
  // Becomes a copy of `s` (a snapshot of a state of the same model).
  void restore(const RecurrentState& s) {
    data_ = s.data_;
    conv_floats_ = s.conv_floats_;
    delta_floats_ = s.delta_floats_;
    n_tokens_ = s.n_tokens_;
  }
  int64_t bytes() const { return int64_t(data_.size() * sizeof(float)); }
  // Floats of one layer's conv state and of one layer's delta state (all v heads).
  int64_t conv_floats() const { return conv_floats_; }
  int64_t delta_floats() const { return delta_floats_; }
  // The raw floats (all layers, in the layout above), for storing a snapshot.
  const std::vector<float>& data() const { return data_; }
  float* mutable_data() { return data_.data(); }
  // A state read back from data() and n_tokens() of a state of the same model
  // (a tier entry); false when `data` does not have the model's size.
  static bool from_data(const ModelConfig& c, int64_t n_tokens, std::vector<float> data, RecurrentState* out) {
    RecurrentState s(c);
    if (data.size() != s.data_.size() || n_tokens < 0) return false;
    s.data_ = std::move(data);
    s.n_tokens_ = n_tokens;
    *out = std::move(s);
    return true;
  }

 private:
  int64_t conv_floats_ = 0, delta_floats_ = 0;
  std::vector<float> data_;
  int64_t n_tokens_ = 0;
};

// A copy of a sequence's state taken inside the forward pass, after the token that
// brings the state to `after` tokens (SeqKv::captures). `into` is a state of the same
// model (RecurrentState(config)); each recurrent layer writes its part as it passes
// that token, and Forward::run sets its n_tokens() to `after` when the pass returns.
// `after` must fall within the batch's entries of that sequence.
struct StateCapture {
  int64_t after = 0;
  RecurrentState* into = nullptr;
};

}  // namespace pc
