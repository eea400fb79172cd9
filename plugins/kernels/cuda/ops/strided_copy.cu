// out[g, r, :] = x[g, r, :] between two strided [G, R, C] views: one block
// per row (grid-stride over rows), its threads over the row's elements,
// moved as 2- or 4-byte words whatever the dtype.
#include "ops/device.cuh"

#include <megahost/error.hpp>

namespace mh::kernels::gpu {
namespace {

template <class Word>
__global__ void strided_copy_kernel(Word* out, RowStrides out_strides, const Word* x, RowStrides x_strides,
                                    int64_t rows, int64_t R, int64_t C) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t g = row / R, r = row % R;
    Word* o = out + g * out_strides.batch + r * out_strides.row;
    const Word* in = x + g * x_strides.batch + r * x_strides.row;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = in[c];
  }
}

template <class Word>
void launch(cudaStream_t stream, void* out, RowStrides out_strides, const void* x, RowStrides x_strides, int64_t G,
            int64_t R, int64_t C) {
  strided_copy_kernel<<<blocks_for(G * R, 1), kThreads, 0, stream>>>(
      static_cast<Word*>(out), out_strides, static_cast<const Word*>(x), x_strides, G * R, R, C);
}

}  // namespace

void strided_copy(cudaStream_t stream, void* out, RowStrides out_strides, const void* x, RowStrides x_strides,
                  int64_t G, int64_t R, int64_t C, int64_t element_bytes) {
  if (G * R * C == 0) return;
  require(element_bytes == 2 || element_bytes == 4,
          "strided_copy: elements of " + std::to_string(element_bytes) + " bytes (the cuda kernels copy 2 or 4)",
          MH_INTERNAL);
  if (element_bytes == 4) launch<uint32_t>(stream, out, out_strides, x, x_strides, G, R, C);
  else launch<uint16_t>(stream, out, out_strides, x, x_strides, G, R, C);
  check_launch("strided_copy");
}

}  // namespace mh::kernels::gpu
