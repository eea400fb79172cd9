// Bias add and its backward, the column sums of dout.
#include "ops/columns.cuh"

namespace mh::kernels::gpu {
namespace {

__global__ void bias_forward_kernel(Floats out, Floats x, Floats bias, int64_t n, int64_t C) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(out, i, load(x, i) + load(bias, i % C));
}

struct DoutTerm {
  Floats dout;
  int64_t C;
  __device__ float2 operator()(int64_t n, int64_t c) const { return make_float2(load(dout, n * C + c), 0.0f); }
};

}  // namespace

void bias_forward(cudaStream_t stream, Floats out, Floats x, Floats bias, int64_t N, int64_t C) {
  bias_forward_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(out, x, bias, N * C, C);
  check_launch("bias_add");
}

void bias_backward(cudaStream_t stream, Floats dbias, Floats dout, int64_t N, int64_t C, void* scratch) {
  column_sums(stream, "bias_bwd", DoutTerm{dout, C}, N, C, scratch, dbias, Floats{nullptr, false});
}

}  // namespace mh::kernels::gpu
