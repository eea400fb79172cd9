// Rotary position embedding, "rotate half": one thread per pair (i, i + D/2).
#include "ops/device.cuh"

#include <megahost/error.hpp>

namespace mh::kernels::gpu {
namespace {

// The angle is formed in f32 as Hugging Face forms it, with the same bits as
// the cpu kernels' (ops/rope.cpp there says why theta^(2i/D) is taken in
// double): the exponent, the reciprocal and the product with the position in
// f32. Each block computes the D/2 frequencies once, into shared memory, so
// the double pow is not paid per element. sincosf of the angle is within 2 ulp.
__global__ void rope_kernel(Floats out, RowStrides out_strides, Floats x, RowStrides x_strides, int64_t G, int64_t S,
                            int64_t D, int64_t position_offset, float theta, float sign, SampleTable positions) {
  extern __shared__ float inv_freq[];
  const int64_t half = D / 2, pairs = G * S * half;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
    inv_freq[i] = 1.0f / static_cast<float>(pow(static_cast<double>(theta), static_cast<double>(exponent)));
  }
  __syncthreads();
  for (int64_t k = first_index(); k < pairs; k += grid_stride()) {
    const int64_t i = k % half, row = k / half, g = row / S, s = row % S;
    float sin_angle, cos_angle;
    const int64_t at =
        positions.data == nullptr ? s : positions.data[(g / positions.per_sample) * positions.cols + s];
    sincosf(static_cast<float>(position_offset + at) * inv_freq[i], &sin_angle, &cos_angle);
    sin_angle *= sign;
    const int64_t xi = g * x_strides.batch + s * x_strides.row + i;
    const int64_t oi = g * out_strides.batch + s * out_strides.row + i;
    const float a = load(x, xi), b = load(x, xi + half);
    store(out, oi, a * cos_angle - b * sin_angle);
    store(out, oi + half, b * cos_angle + a * sin_angle);
  }
}

}  // namespace

void rope(cudaStream_t stream, Floats out, RowStrides out_strides, Floats x, RowStrides x_strides, int64_t G,
          int64_t S, int64_t D, int64_t position_offset, float theta, bool inverse, SampleTable positions) {
  const int64_t pairs = G * S * (D / 2);
  if (pairs == 0) return;
  // The frequencies fill the 48 KiB of shared memory every device has at D = 24576.
  const size_t shared = static_cast<size_t>(D / 2) * sizeof(float);
  require(shared <= 48 * 1024,
          "rope: head size D = " + std::to_string(D) + " is past the 24576 the cuda kernels take (shared memory)");
  rope_kernel<<<blocks_for(pairs), kThreads, shared, stream>>>(out, out_strides, x, x_strides, G, S, D,
                                                               position_offset, theta, inverse ? -1.0f : 1.0f,
                                                               positions);
  check_launch("rope");
}

}  // namespace mh::kernels::gpu
