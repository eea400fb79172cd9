#include "ops/ops.hpp"

#include <cmath>

namespace mh::kernels::cpu {

// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p)
void adamw(float* param, float* m, float* v, const float* grad, float lr, float beta1, float beta2, float eps,
           float weight_decay, int64_t t, int64_t n, int threads) {
  // In double: 1 - 0.999^t loses most of its digits in f32 for small t.
  const float correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t)));
  const float correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t)));
#pragma omp parallel for simd num_threads(team(threads, n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / correction1, v_hat = vi / correction2;
    param[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * param[i]);
  }
}

}  // namespace mh::kernels::cpu
