#include "ops/ops.hpp"

#include <algorithm>

#include "bf16.hpp"

namespace mh::kernels::cpu {
namespace {

// Column block of embedding_backward (see bias.cpp).
constexpr int64_t kColumnBlock = 64;

}  // namespace

// Ids outside this shard's [id_start, id_start + R) read as a zero row, so
// that adding the shards' outputs gives the full lookup.
namespace {

template <class T>
void lookup(float* out, const T* table, const int32_t* ids, int64_t id_start, bool accumulate, int64_t N, int64_t R,
            int64_t C, int threads) {
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = ids[n] - id_start;
    const T* t = row >= 0 && row < R ? table + row * C : nullptr;
    float* o = out + n * C;
    if (t != nullptr && accumulate) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] += widen(t[c]);
    } else if (t != nullptr) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = widen(t[c]);
    } else if (!accumulate) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = 0.0f;
    }
  }
}

}  // namespace

void embedding_forward(float* out, const float* table, const int32_t* ids, int64_t id_start, bool accumulate,
                       int64_t N, int64_t R, int64_t C, int threads) {
  lookup(out, table, ids, id_start, accumulate, N, R, C, threads);
}

void embedding_forward_bf16(float* out, const uint16_t* table, const int32_t* ids, int64_t id_start, bool accumulate,
                            int64_t N, int64_t R, int64_t C, int threads) {
  lookup(out, table, ids, id_start, accumulate, N, R, C, threads);
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t id_start, int64_t N,
                        int64_t R, int64_t C, int threads) {
  // Tokens repeat ids, so threads own column blocks rather than tokens: no
  // two threads ever add to the same dtable element.
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(team(threads, N * C)) schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = ids[n] - id_start;
      if (row < 0 || row >= R) continue;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dtable[row * C + c] += dout[n * C + c];
    }
  }
}

}  // namespace mh::kernels::cpu
