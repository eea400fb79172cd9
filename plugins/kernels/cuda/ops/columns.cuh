// Column sums of an (N, C) term, the backward of everything broadcast over
// rows (bias, layernorm weight and bias): deterministic, without atomics.
// The rows are split into chunks; one pass sums each chunk of 32 columns into
// partial sums, a second adds the chunks up in order into the outputs.
#pragma once

#include "ops/device.cuh"

namespace mh::kernels::gpu {

constexpr int kColumnTile = 32;  // columns per block: one warp reads them coalesced
constexpr int kRowThreads = 8;   // rows of a chunk read at once

// partial [2][chunks][C]: the two sums of term(row, col) over each chunk's
// rows; gridDim = (C / 32 tiles, chunks), blockDim = (32, 8).
template <class Term>
__global__ void column_partials(Term term, int64_t N, int64_t C, float* partial) {
  const int64_t chunks = gridDim.y, chunk = blockIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  float2 sum = make_float2(0.0f, 0.0f);
  if (col < C) {
    for (int64_t row = N * chunk / chunks + threadIdx.y; row < N * (chunk + 1) / chunks; row += kRowThreads) {
      const float2 t = term(row, col);
      sum.x += t.x;
      sum.y += t.y;
    }
  }
  __shared__ float2 rows[kRowThreads][kColumnTile];
  rows[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= C) return;
  for (int y = 1; y < kRowThreads; ++y) {
    sum.x += rows[y][threadIdx.x].x;
    sum.y += rows[y][threadIdx.x].y;
  }
  partial[chunk * C + col] = sum.x;
  partial[(chunks + chunk) * C + col] = sum.y;
}

// out[col] += sum over the chunks of partial[chunk * C + col]. Static: each
// .cu file that includes this has its own copy (no relocatable device code).
static __global__ void add_column_sums(Floats out, const float* partial, int64_t chunks, int64_t C) {
  for (int64_t col = first_index(); col < C; col += grid_stride()) {
    float sum = 0.0f;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial[chunk * C + col];
    store(out, col, load(out, col) + sum);
  }
}

// first (C) += column sums of term(row, col).x, second (C) += those of .y
// (second.data NULL: not wanted). scratch: column_scratch_bytes(C).
template <class Term>
void column_sums(cudaStream_t stream, const char* op, Term term, int64_t N, int64_t C, void* scratch, Floats first,
                 Floats second) {
  if (C == 0) return;
  const int64_t chunks = std::clamp<int64_t>(N, 1, kColumnChunks);
  float* partial = static_cast<float*>(scratch);
  const dim3 grid(static_cast<unsigned>((C + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(chunks));
  column_partials<<<grid, dim3(kColumnTile, kRowThreads), 0, stream>>>(term, N, C, partial);
  add_column_sums<<<blocks_for(C), kThreads, 0, stream>>>(first, partial, chunks, C);
  if (second.data != nullptr)
    add_column_sums<<<blocks_for(C), kThreads, 0, stream>>>(second, partial + chunks * C, chunks, C);
  check_launch(op);
}

}  // namespace mh::kernels::gpu
