// Softmax cross-entropy in three steps, one block per row, so that
// vocabulary shards can combine row_max (all-reduce max) and sum_exp,
// target_logit (all-reduce sum) between the steps; see MH_XentArgs.
#include "ops/device.cuh"

namespace mh::kernels::gpu {
namespace {

__global__ void xent_max_kernel(float* row_max, Floats logits, int64_t N, int64_t V, int64_t in_vocab) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    float max = -INFINITY;
    for (int64_t v = threadIdx.x; v < in_vocab; v += blockDim.x) max = fmaxf(max, load(logits, n * V + v));
    max = block_max(max);
    if (threadIdx.x == 0) row_max[n] = max;
  }
}

// A target outside this shard's [id_start, id_start + V) contributes 0, so
// the shards' target_logit add up to the one shard holding it.
__global__ void xent_stats_kernel(float* sum_exp, float* target_logit, Floats logits, const float* row_max,
                                  const int32_t* targets, int64_t id_start, int64_t N, int64_t V,
                                  int64_t in_vocab) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float max = row_max[n];
    float sum = 0.0f;
    for (int64_t v = threadIdx.x; v < in_vocab; v += blockDim.x) sum += expf(load(logits, n * V + v) - max);
    sum = block_sum(sum);
    if (threadIdx.x == 0) {
      sum_exp[n] = sum;
      const int64_t t = targets[n] - id_start;
      target_logit[n] = t >= 0 && t < V ? load(logits, n * V + t) : 0.0f;
    }
  }
}

__global__ void xent_backward_kernel(Floats logits, const float* row_max, const float* sum_exp,
                                     const int32_t* targets, int64_t id_start, float scale, int64_t N, int64_t V,
                                     int64_t in_vocab) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float max = row_max[n], factor = scale / sum_exp[n];
    const int64_t t = targets[n] - id_start;
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
      const float softmax = v < in_vocab ? factor * expf(load(logits, n * V + v) - max) : 0.0f;
      store(logits, n * V + v, v == t ? softmax - scale : softmax);
    }
  }
}

}  // namespace

void xent_max(cudaStream_t stream, float* row_max, Floats logits, int64_t N, int64_t V, int64_t in_vocab) {
  xent_max_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(row_max, logits, N, V, in_vocab);
  check_launch("xent max");
}

void xent_stats(cudaStream_t stream, float* sum_exp, float* target_logit, Floats logits, const float* row_max,
                const int32_t* targets, int64_t id_start, int64_t N, int64_t V, int64_t in_vocab) {
  xent_stats_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(sum_exp, target_logit, logits, row_max, targets,
                                                               id_start, N, V, in_vocab);
  check_launch("xent stats");
}

void xent_backward(cudaStream_t stream, Floats logits, const float* row_max, const float* sum_exp,
                   const int32_t* targets, int64_t id_start, float scale, int64_t N, int64_t V,
                   int64_t in_vocab) {
  xent_backward_kernel<<<blocks_for(N, 1), kThreads, 0, stream>>>(logits, row_max, sum_exp, targets, id_start, scale,
                                                                  N, V, in_vocab);
  check_launch("xent backward");
}

}  // namespace mh::kernels::gpu
