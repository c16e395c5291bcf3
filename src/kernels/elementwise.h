// Row-wise operations of the forward pass. Each works on one row at a time with
// a fixed, sequential reduction order, so results never depend on batching.
#pragma once
#include <cstdint>
#include <vector>

namespace pc {

// y = x / sqrt(mean(x²) + eps) * w        (n elements; y may alias x)
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding. Rotates the first n_rot dims of a head vector:
// normal mode pairs (2i, 2i+1), NeoX mode pairs (i, i + n_rot/2), by angle
// theta_i = pos * freq_scale * base^(-2i/n_rot) / factors[i], with cos and sin
// times attn_factor.
struct RopeParams {
  int64_t n_rot = 0;
  float base = 10000.f;
  float freq_scale = 1.f;
  bool neox = false;
  const float* factors = nullptr;  // [n_rot/2] or null
  float attn_factor = 1.f;         // cos and sin multiplied by it (LongRoPE's attention factor)
};

class Rope {
 public:
  explicit Rope(const RopeParams& p);
  int64_t n_pairs() const { return int64_t(freq_.size()); }
  // cos/sin of every pair's angle at `pos`: cs = [cos_0, sin_0, cos_1, sin_1, ...].
  // Computed once per token and shared by all heads and layers.
  void angles(int32_t pos, float* cs) const;
  // Rotates one head vector in place with angles from angles().
  void apply(float* x, const float* cs) const;

 private:
  std::vector<double> freq_;  // [n_rot/2] radians per position
  double attn_factor_;
  bool neox_;
};

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)) with the
// project's exp (fixed_exp.h); the scalar and AVX2 paths are bitwise equal.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i], GELU in the tanh approximation,
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g³))), with the project's tanh
// (fixed_exp.h); the scalar and AVX2 paths are bitwise equal.
void geglu_tanh(const float* gate, const float* up, float* out, int64_t n);

// x[i] = cap * tanh(x[i] * (1 / cap)) (logit soft-capping), the project's tanh.
void softcap_inplace(float* x, int64_t n, float cap);

// y += x
void add_inplace(float* y, const float* x, int64_t n);

// y[i] = fp32_to_fp16(x[i]) (gguf/quants.h: round to nearest even); the AVX2
// path (vcvtps2ph) gives the same bits.
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);

}  // namespace pc
