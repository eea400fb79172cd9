// Strided batched GEMM through single-threaded BLAS calls: the team is ours
// (OpenMP, sized per rank), never the BLAS library's, whose thread count is
// process-global. docs/kernels-cpu.md has the measurements behind this.
#include "ops/ops.hpp"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "bf16.hpp"

namespace mh::kernels::cpu {
namespace {

// Below this a product runs on one thread: about 50 us on one core, where
// waking the team and splitting the packing would cost more than it saves.
constexpr double kParallelFlops = 4e6;

// Up to this many rows of a, a product against a transposed b (a linear
// layer's weight, stored (N, K)) streams b once: a decode step's GEMMs have
// one row per sequence served, and sgemm would first pack all of b into
// blocks, which for so few rows is traffic of its own (docs/kernels-cpu.md).
constexpr int64_t kFewRows = 8;

// c (M, N) = alpha * a (M, K) @ b^T + beta * c with b stored (N, K), f32 or
// bf16: each row of b meets every row of a while it sits in L1.
template <class T>
void few_rows_times_transposed(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
                               const T* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t j = 0; j < N; ++j) {
    const T* w = b + j * ldb;
    for (int64_t i = 0; i < M; ++i) {
      const float* x = a + i * lda;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t k = 0; k < K; ++k) sum += x[k] * widen(w[k]);
      float& out = c[i * ldc + j];
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;  // beta 0 ignores what c held, as BLAS does
    }
  }
}

// c (M, N) = alpha * op(a) (M, K) @ op(b) (K, N) + beta * c, on the calling thread
void product(int64_t M, int64_t N, int64_t K, float alpha, const float* a, const StridedMatrix& A, const float* b,
             const StridedMatrix& B, float beta, float* c, int64_t ldc) {
  if (streams_b(M, A.trans, B.trans)) return few_rows_times_transposed(M, N, K, alpha, a, A.ld, b, B.ld, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, A.trans ? CblasTrans : CblasNoTrans, B.trans ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, a, static_cast<int>(A.ld), b,
              static_cast<int>(B.ld), beta, c, static_cast<int>(ldc));
}

void product(int64_t M, int64_t N, int64_t K, float alpha, const float* a, const StridedMatrix& A, const uint16_t* b,
             const Bf16Matrix& B, float beta, float* c, int64_t ldc) {
  few_rows_times_transposed(M, N, K, alpha, a, A.ld, b, B.ld, beta, c, ldc);
}

// One product split between the team along the longer side of c: each thread
// multiplies its block of rows of op(a) (or columns of op(b)) by all of the
// other operand.
template <class T>
void split_product(int64_t M, int64_t N, int64_t K, float alpha, const float* a, const StridedMatrix& A, const T* b,
                   const Strided<T>& B, float beta, float* c, int64_t ldc, int threads) {
  const bool by_rows = M >= N;
  const int64_t extent = by_rows ? M : N;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = extent * t / nt, hi = extent * (t + 1) / nt;
    if (hi > lo && by_rows)
      product(hi - lo, N, K, alpha, a + (A.trans ? lo : lo * A.ld), A, b, B, beta, c + lo * ldc, ldc);
    else if (hi > lo)
      product(M, hi - lo, K, alpha, a, A, b + (B.trans ? lo * B.ld : lo), B, beta, c + lo, ldc);
  }
}

template <class T>
void batched(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, StridedMatrix a, Strided<T> b, float beta,
             float* c, int64_t c_batch_stride, int64_t ldc, int threads) {
  if (batch == 0 || M == 0 || N == 0) return;
  const double flops = 2.0 * M * N * K;
  if (batch >= threads || flops < kParallelFlops) {
    // Many (or small) products: one whole product per thread.
    const int nt = flops * batch < kParallelFlops ? 1 : threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      product(M, N, K, alpha, a.data + i * a.batch_stride, a, b.data + i * b.batch_stride, b, beta,
              c + i * c_batch_stride, ldc);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    split_product(M, N, K, alpha, a.data + i * a.batch_stride, a, b.data + i * b.batch_stride, b, beta,
                  c + i * c_batch_stride, ldc, threads);
}

// Rows of b one pass of the bf16-unit kernel walks at once: four dot
// products in flight hide the latency of each vdpbf16ps chain.
constexpr int64_t kUnitRows = 4;

// c[j] = alpha * a . b_j + beta * c[j] for the rows j0 <= j < j1 of b, all bf16
// with unit inner strides. vdpbf16ps multiplies 32 bf16 pairs into 16 f32
// lanes per instruction (products exact, sums rounded in f32, subnormals
// flushed: the same arithmetic as oneDNN's bf16 GEMMs), so the weight is read
// as stored with no widening. The rows kUnitRows ahead are prefetched: they
// come from DRAM in a decode step, and the hardware prefetcher stops at
// every page.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void row_on_bf16_units(int64_t j0, int64_t j1, int64_t K,
                                                                             float alpha, const uint16_t* a,
                                                                             const uint16_t* b, int64_t ldb,
                                                                             float beta, float* c) {
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (K % 32)) - 1);
  const int64_t full = K - K % 32;
  for (int64_t j = j0; j < j1; j += kUnitRows) {
    const int64_t rows = std::min(kUnitRows, j1 - j);
    __m512 sum[kUnitRows] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t k = 0; k < full; k += 32) {
      const __m512bh x = (__m512bh)_mm512_loadu_si512(a + k);
      for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* w = b + (j + r) * ldb + k;
        _mm_prefetch(reinterpret_cast<const char*>(w + kUnitRows * ldb), _MM_HINT_T0);
        sum[r] = _mm512_dpbf16_ps(sum[r], x, (__m512bh)_mm512_loadu_si512(w));
      }
    }
    if (tail != 0) {
      const __m512bh x = (__m512bh)_mm512_maskz_loadu_epi16(tail, a + full);
      for (int64_t r = 0; r < rows; ++r)
        sum[r] = _mm512_dpbf16_ps(sum[r], x, (__m512bh)_mm512_maskz_loadu_epi16(tail, b + (j + r) * ldb + full));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float dot = _mm512_reduce_add_ps(sum[r]);
      c[j + r] = beta == 0.0f ? alpha * dot : alpha * dot + beta * c[j + r];  // beta 0 ignores c, as BLAS does
    }
  }
}

}  // namespace

void row_times_transposed_on_bf16_units(int64_t batch, int64_t N, int64_t K, float alpha, Bf16Matrix a,
                                        Bf16Matrix b, float beta, float* c, int64_t c_batch_stride, int threads) {
  // The team splits the batch's rows of b, flattened, into even ranges.
  const int64_t rows = batch * N;
  const int nt = 2.0 * double(rows) * double(K) < kParallelFlops ? 1 : threads;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    for (int64_t lo = rows * t / n, hi = rows * (t + 1) / n; lo < hi;) {
      const int64_t i = lo / N, j0 = lo % N, j1 = std::min(N, j0 + (hi - lo));
      row_on_bf16_units(j0, j1, K, alpha, a.data + i * a.batch_stride, b.data + i * b.batch_stride, b.ld, beta,
                        c + i * c_batch_stride);
      lo += j1 - j0;
    }
  }
}

bool streams_b(int64_t M, bool trans_a, bool trans_b) { return M <= kFewRows && trans_b && !trans_a; }

void gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, StridedMatrix a, StridedMatrix b,
          float beta, float* c, int64_t c_batch_stride, int64_t ldc, int threads) {
  batched(batch, M, N, K, alpha, a, b, beta, c, c_batch_stride, ldc, threads);
}

void gemm_bf16_b(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, StridedMatrix a, Bf16Matrix b,
                 float beta, float* c, int64_t c_batch_stride, int64_t ldc, int threads) {
  batched(batch, M, N, K, alpha, a, b, beta, c, c_batch_stride, ldc, threads);
}

}  // namespace mh::kernels::cpu
