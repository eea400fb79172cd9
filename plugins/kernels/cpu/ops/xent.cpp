// Softmax cross-entropy in three steps, so that vocabulary shards can combine
// their row_max (all-reduce max) and sum_exp, target_logit (all-reduce sum)
// between the steps; see MH_XentArgs.
#include "ops/fast_math.hpp"
#include "ops/ops.hpp"

#include <cmath>
#include <limits>

namespace mh::kernels::cpu {

void xent_max(float* row_max, const float* logits, int64_t N, int64_t V, int64_t in_vocab, int threads) {
#pragma omp parallel for num_threads(team(threads, N * V)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * V;
    float max = -std::numeric_limits<float>::infinity();
    // A compare and select, not std::fmax, which GCC leaves as a scalar call.
    // Both skip NaN (the comparison is false), so the result is the same.
#pragma omp simd reduction(max : max)
    for (int64_t v = 0; v < in_vocab; ++v) max = l[v] > max ? l[v] : max;
    row_max[n] = max;
  }
}

// A target outside this shard's [id_start, id_start + V) contributes 0, so the
// shards' target_logit add up to the one shard holding it.
void xent_stats(float* sum_exp, float* target_logit, const float* logits, const float* row_max,
                const int32_t* targets, int64_t id_start, int64_t N, int64_t V, int64_t in_vocab, int threads) {
#pragma omp parallel for num_threads(team(threads, N * V)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * V;
    const float max = row_max[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < in_vocab; ++v) sum += fast_exp(l[v] - max);
    sum_exp[n] = sum;
    const int64_t t = targets[n] - id_start;
    target_logit[n] = t >= 0 && t < V ? l[t] : 0.0f;
  }
}

void xent_backward(float* logits, const float* row_max, const float* sum_exp, const int32_t* targets,
                   int64_t id_start, float scale, int64_t N, int64_t V, int64_t in_vocab, int threads) {
#pragma omp parallel for num_threads(team(threads, N * V)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* l = logits + n * V;
    const float max = row_max[n], factor = scale / sum_exp[n];
#pragma omp simd
    for (int64_t v = 0; v < in_vocab; ++v) l[v] = factor * fast_exp(l[v] - max);
#pragma omp simd
    for (int64_t v = in_vocab; v < V; ++v) l[v] = 0.0f;
    const int64_t t = targets[n] - id_start;
    if (t >= 0 && t < V) l[t] -= scale;
  }
}

}  // namespace mh::kernels::cpu
