// Causal scaled softmax over the last dimension of [G, Q, T] scores, one
// block per row: the Q rows are the last Q positions of T, so row i of a
// group, at position p = T - Q + i, sees columns first..p and the rest come
// out 0 (Q = T = S in training; first is 0, or its document's start).
#include "ops/device.cuh"

namespace mh::kernels::gpu {
namespace {

// The first column row r of the [rows / Q, Q, T] scores sees; a start past
// the row's position (a caller's bad table) is taken as the position.
__device__ int64_t first_seen(SampleTable starts, int64_t r, int64_t Q, int64_t T) {
  if (starts.data == nullptr) return 0;
  const int64_t p = T - Q + r % Q, first = starts.data[(r / Q / starts.per_sample) * starts.cols + p];
  return first < 0 ? 0 : first > p ? p : first;
}

__global__ void softmax_forward_kernel(Floats out, Floats x, float scale, int64_t rows, int64_t Q, int64_t T,
                                       SampleTable starts) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t seen = T - Q + r % Q + 1, row = r * T, first = first_seen(starts, r, Q, T);
    float max = -INFINITY;
    for (int64_t j = first + threadIdx.x; j < seen; j += blockDim.x) max = fmaxf(max, scale * load(x, row + j));
    max = block_max(max);
    float sum = 0.0f;
    for (int64_t j = first + threadIdx.x; j < seen; j += blockDim.x) sum += expf(scale * load(x, row + j) - max);
    const float inv = 1.0f / block_sum(sum);
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
      store(out, row + j, j >= first && j < seen ? expf(scale * load(x, row + j) - max) * inv : 0.0f);
  }
}

// dx = out * (dout - sum(dout * out)) * scale over the visible columns; the
// masked ones get 0 whatever dout holds there.
__global__ void softmax_backward_kernel(Floats dx, Floats out, Floats dout, float scale, int64_t rows, int64_t Q,
                                        int64_t T, SampleTable starts) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t seen = T - Q + r % Q + 1, row = r * T, first = first_seen(starts, r, Q, T);
    float dot = 0.0f;
    for (int64_t j = first + threadIdx.x; j < seen; j += blockDim.x) dot += load(dout, row + j) * load(out, row + j);
    dot = block_sum(dot);
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
      store(dx, row + j, j >= first && j < seen ? load(out, row + j) * (load(dout, row + j) - dot) * scale : 0.0f);
  }
}

}  // namespace

void softmax_forward(cudaStream_t stream, Floats out, Floats x, float scale, int64_t G, int64_t Q, int64_t T,
                     SampleTable starts) {
  softmax_forward_kernel<<<blocks_for(G * Q, 1), kThreads, 0, stream>>>(out, x, scale, G * Q, Q, T, starts);
  check_launch("softmax");
}

void softmax_backward(cudaStream_t stream, Floats dx, Floats out, Floats dout, float scale, int64_t G, int64_t Q,
                      int64_t T, SampleTable starts) {
  softmax_backward_kernel<<<blocks_for(G * Q, 1), kThreads, 0, stream>>>(dx, out, dout, scale, G * Q, Q, T, starts);
  check_launch("softmax_bwd");
}

}  // namespace mh::kernels::gpu
