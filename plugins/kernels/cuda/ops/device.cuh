// What the kernels share: f32/bf16 element access, launch sizes, block-wide
// reductions and the launch check.
#pragma once

#include "cuda_check.hpp"
#include "ops/launch.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace mh::kernels::gpu {

__device__ inline float load(Floats t, int64_t i) {
  return t.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(t.data)[i]) : static_cast<const float*>(t.data)[i];
}

__device__ inline void store(Floats t, int64_t i, float value) {
  if (t.bf16) static_cast<__nv_bfloat16*>(t.data)[i] = __float2bfloat16_rn(value);
  else static_cast<float*>(t.data)[i] = value;
}

__device__ inline void atomic_add(Floats t, int64_t i, float value) {
  if (t.bf16) atomicAdd(static_cast<__nv_bfloat16*>(t.data) + i, __float2bfloat16_rn(value));
  else atomicAdd(static_cast<float*>(t.data) + i, value);
}

// Threads per block of every kernel.
constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Blocks for `work` items (elements or rows) of `per_block` each: enough to
// fill any device, capped so the grid stays small; kernels loop over the rest.
inline unsigned blocks_for(int64_t work, int64_t per_block = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, int64_t{1} << 16));
}

// Grid-stride loop over [0, n): each thread's first index and its stride.
__device__ inline int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op>
__device__ T warp_reduce(T value, Op op) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// `op` over every thread's value, returned to every thread of the block. All
// threads of the block must call it; the order of the operands is fixed, so
// the result is the same run to run.
template <class T, class Op>
__device__ T block_reduce(T value, Op op, T identity) {
  __shared__ T partial[kWarp];
  value = warp_reduce(value, op);
  __syncthreads();  // an earlier call's readers are done with `partial`
  if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = value;
  __syncthreads();
  const unsigned warps = (blockDim.x + kWarp - 1) / kWarp;
  return warp_reduce(threadIdx.x % kWarp < warps ? partial[threadIdx.x % kWarp] : identity, op);
}

__device__ inline float block_sum(float value) { return block_reduce(value, Sum{}, 0.0f); }
__device__ inline float block_max(float value) { return block_reduce(value, Max{}, -INFINITY); }

// Throws mh::Error naming `op` when its launch failed.
inline void check_launch(const char* op) { check_cuda(cudaGetLastError(), std::string(op) + ": kernel launch"); }

}  // namespace mh::kernels::gpu
