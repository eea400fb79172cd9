// Rotary position embedding, "rotate half" (GPT-NeoX, Llama, Hugging Face).
#include "ops/ops.hpp"

#include <cmath>
#include <vector>

namespace mh::kernels::cpu {

// cos and sin of position (offset + s) times frequency i, as [S, D/2] each.
// The angle is formed in f32 as Hugging Face forms it: the exponent 2i/D in
// f32, theta to that power rounded to f32 (pow in double, so the cuda kernels
// get the same bits: a last-bit difference in inv_freq moves the angle at
// position 4000 by 2e-4), its reciprocal in f32, times the position in f32.
// cos and sin of that angle are taken in double and rounded once.
RotationTable rotation_table(int64_t S, int64_t D, int64_t offset, float theta, bool inverse, int threads) {
  const int64_t half = D / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
    inv_freq[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
  }
  RotationTable t{std::vector<float>(static_cast<size_t>(S * half)), std::vector<float>(static_cast<size_t>(S * half))};
  const double sign = inverse ? -1.0 : 1.0;
#pragma omp parallel for num_threads(team(threads, 16 * S * half)) schedule(static)
  for (int64_t s = 0; s < S; ++s) {
    const float position = static_cast<float>(offset + s);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(position * inv_freq[i]);
      t.cos[s * half + i] = static_cast<float>(std::cos(angle));
      t.sin[s * half + i] = static_cast<float>(sign * std::sin(angle));
    }
  }
  return t;
}

void rope(float* out, RowStrides out_strides, const float* x, RowStrides x_strides, int64_t G, int64_t S, int64_t D,
          const RotationTable& table, int64_t first, const int32_t* positions, int threads) {
  const int64_t half = D / 2;
#pragma omp parallel for num_threads(team(threads, G * S * D)) schedule(static)
  for (int64_t row = 0; row < G * S; ++row) {
    const int64_t g = row / S, s = row % S;
    const float* xr = x + g * x_strides.batch + s * x_strides.row;
    float* outr = out + g * out_strides.batch + s * out_strides.row;
    const int64_t at = positions ? positions[first + s] : first + s;
    const float* c = table.cos.data() + at * half;
    const float* sn = table.sin.data() + at * half;
    // In place, iteration i reads and writes only elements i and i + D/2.
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float a = xr[i], b = xr[i + half];
      outr[i] = a * c[i] - b * sn[i];
      outr[i + half] = b * c[i] + a * sn[i];
    }
  }
}

}  // namespace mh::kernels::cpu
