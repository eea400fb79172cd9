// Dropout with masks from mh::rng: element (r, j) of the [n / row_len,
// row_len] view draws counter base + r * row_stride + j, the same draw the
// cpu kernels make, so masks agree bit for bit on every device and layout.
#include "ops/device.cuh"

#include <megahost/rng.hpp>

namespace mh::kernels::gpu {
namespace {

__global__ void dropout_forward_kernel(Floats out, uint8_t* mask, Floats x, Floats residual, float p,
                                       MH_RngSpan rng, int64_t n, float keep_scale) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint64_t r = uint64_t(i) / rng.row_len, j = uint64_t(i) - r * rng.row_len;
    const bool keep = rng::uniform(rng.seed, rng.base + r * rng.row_stride + j) >= p;
    mask[i] = keep ? 1 : 0;
    store(out, i, load(x, i) * (keep ? keep_scale : 0.0f) + (residual.data != nullptr ? load(residual, i) : 0.0f));
  }
}

__global__ void dropout_backward_kernel(Floats dx, Floats dout, const uint8_t* mask, int64_t n, float keep_scale) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    store(dx, i, load(dout, i) * (mask[i] != 0 ? keep_scale : 0.0f));
}

}  // namespace

void dropout_forward(cudaStream_t stream, Floats out, uint8_t* mask, Floats x, Floats residual, float p,
                     const MH_RngSpan& rng, int64_t n) {
  dropout_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, mask, x, residual, p, rng, n,
                                                                 1.0f / (1.0f - p));
  check_launch("dropout");
}

void dropout_backward(cudaStream_t stream, Floats dx, Floats dout, const uint8_t* mask, float p, int64_t n) {
  dropout_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dx, dout, mask, n, 1.0f / (1.0f - p));
  check_launch("dropout_bwd");
}

}  // namespace mh::kernels::gpu
