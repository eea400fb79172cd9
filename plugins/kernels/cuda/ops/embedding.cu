// Embedding lookup and its backward. Ids outside this shard's
// [id_start, id_start + R) read as a zero row, so that adding the shards'
// outputs gives the full lookup, and contribute no gradient.
#include "ops/device.cuh"

namespace mh::kernels::gpu {
namespace {

__global__ void embedding_forward_kernel(Floats out, Floats table, const int32_t* ids, int64_t id_start,
                                         bool accumulate, int64_t N, int64_t R, int64_t C) {
  for (int64_t i = first_index(); i < N * C; i += grid_stride()) {
    const int64_t n = i / C, c = i - n * C, row = ids[n] - id_start;
    if (row >= 0 && row < R) {
      const float value = load(table, row * C + c);
      store(out, i, accumulate ? load(out, i) + value : value);
    } else if (!accumulate) {
      store(out, i, 0.0f);
    }
  }
}

// Tokens repeat ids, so several threads may add to one dtable element:
// atomic adds, in an order that varies run to run.
__global__ void embedding_backward_kernel(Floats dtable, Floats dout, const int32_t* ids, int64_t id_start,
                                          int64_t N, int64_t R, int64_t C) {
  for (int64_t i = first_index(); i < N * C; i += grid_stride()) {
    const int64_t n = i / C, c = i - n * C, row = ids[n] - id_start;
    if (row >= 0 && row < R) atomic_add(dtable, row * C + c, load(dout, i));
  }
}

}  // namespace

void embedding_forward(cudaStream_t stream, Floats out, Floats table, const int32_t* ids, int64_t id_start,
                       bool accumulate, int64_t N, int64_t R, int64_t C) {
  embedding_forward_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(out, table, ids, id_start, accumulate, N, R,
                                                                         C);
  check_launch("embedding");
}

void embedding_backward(cudaStream_t stream, Floats dtable, Floats dout, const int32_t* ids, int64_t id_start,
                        int64_t N, int64_t R, int64_t C) {
  embedding_backward_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(dtable, dout, ids, id_start, N, R, C);
  check_launch("embedding_bwd");
}

}  // namespace mh::kernels::gpu
