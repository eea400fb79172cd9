#include "ops/ops.hpp"

#include <cstring>

namespace mh::kernels::cpu {

// One memcpy per row; rows are split over the team only when the copy is
// large enough to pay for waking it (team()), which a decode step's few
// rows never are.
void strided_copy(void* out, RowStrides out_strides, const void* x, RowStrides x_strides, int64_t G, int64_t R,
                  int64_t row_bytes, int64_t element_bytes, int threads) {
  auto* o = static_cast<char*>(out);
  const auto* in = static_cast<const char*>(x);
#pragma omp parallel for num_threads(team(threads, G * R * row_bytes / element_bytes)) schedule(static)
  for (int64_t row = 0; row < G * R; ++row) {
    const int64_t g = row / R, r = row % R;
    std::memcpy(o + (g * out_strides.batch + r * out_strides.row) * element_bytes,
                in + (g * x_strides.batch + r * x_strides.row) * element_bytes, static_cast<size_t>(row_bytes));
  }
}

}  // namespace mh::kernels::cpu
