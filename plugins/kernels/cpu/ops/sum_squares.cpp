#include "ops/ops.hpp"

namespace mh::kernels::cpu {

// Accumulated in double: the gradient norm of a large model sums ~1e8
// squares, far past f32's 24 bits.
void sum_squares(float* out, const float* x, int64_t n, int threads) {
  double sum = 0.0;
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  out[0] += static_cast<float>(sum);
}

}  // namespace mh::kernels::cpu
