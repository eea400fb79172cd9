#include "blas.hpp"

#include "cuda_check.hpp"
#include "ops/launch.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <climits>
#include <string>

namespace mh::kernels {
namespace {

cudaDataType_t data_type(const MH_Tensor& t) { return t.dtype == MH_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

cublasOperation_t transposition(int32_t trans) { return trans != 0 ? CUBLAS_OP_T : CUBLAS_OP_N; }

MH_Tensor square(void* data, MH_DType dtype, int64_t n, int device) {
  MH_Tensor t = placed(MH_Tensor{}, {MH_DEVICE_CUDA, device});
  t.data = data;
  t.dtype = dtype;
  t.ndim = 3;
  t.shape[0] = 1;
  t.shape[1] = t.shape[2] = n;
  t.strides[0] = n * n;
  t.strides[1] = n;
  t.strides[2] = 1;
  return t;
}

class Event {
 public:
  Event() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

Blas::Blas(cudaStream_t stream) : stream_(stream) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
}

Blas::~Blas() { cublasDestroy(handle_); }

// Row-major matrices read column-major are their transposes, and row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. So cuBLAS multiplies
// the stored B by the stored A with the same transposition flags, m and n
// swapped, each leading dimension and batch stride as given. An empty inner
// dimension leaves c = beta * c, which we do ourselves rather than count on
// cuBLAS for (BLAS libraries have differed on it).
void Blas::gemm(const MH_GemmArgs& g, const GemmDims& d) {
  if (d.batch == 0 || d.m == 0 || d.n == 0) return;
  if (d.k == 0) {
    gpu::scale_matrices(stream_, {g.c.data, g.c.dtype == MH_BF16}, g.beta, d.batch, d.m, d.n, g.c.strides[0],
                        g.c.strides[1]);
    return;
  }
  require(d.batch <= INT_MAX, "gemm: a batch of " + std::to_string(d.batch) + " exceeds cuBLAS's 32-bit batch count");
  check_cublas(cublasGemmStridedBatchedEx(handle_, transposition(g.trans_b), transposition(g.trans_a),
                                          static_cast<int>(d.n), static_cast<int>(d.m), static_cast<int>(d.k),
                                          &g.alpha, g.b.data, data_type(g.b), static_cast<int>(g.b.strides[1]),
                                          g.b.strides[0], g.a.data, data_type(g.a), static_cast<int>(g.a.strides[1]),
                                          g.a.strides[0], &g.beta, g.c.data, data_type(g.c),
                                          static_cast<int>(g.c.strides[1]), g.c.strides[0],
                                          static_cast<int>(d.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm (cublasGemmStridedBatchedEx)");
}

double measure_gemm_flops(Blas& blas, CachingAllocator& memory, cudaStream_t stream, MH_DType dtype, int64_t n) {
  const uint64_t bytes = uint64_t(n * n) * (dtype == MH_BF16 ? 2 : 4);
  void* a = memory.allocate(bytes);
  void* b = memory.allocate(bytes);
  void* c = memory.allocate(bytes);
  gpu::fill_uniform(stream, {a, dtype == MH_BF16}, n * n, 1);
  gpu::fill_uniform(stream, {b, dtype == MH_BF16}, n * n, 2);
  MH_GemmArgs g{};
  g.struct_size = sizeof(g);
  g.a = square(a, dtype, n, memory.device());
  g.b = square(b, dtype, n, memory.device());
  g.c = square(c, dtype, n, memory.device());
  g.alpha = 1.0f;
  Event start, stop;
  float best_ms = 1e30f;
  for (int rep = 0; rep < 7; ++rep) {
    check_cuda(cudaEventRecord(start.get(), stream), "peak measurement");
    blas.gemm(g, {1, n, n, n});
    check_cuda(cudaEventRecord(stop.get(), stream), "peak measurement");
    check_cuda(cudaEventSynchronize(stop.get()), "peak measurement");
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "peak measurement");
    if (rep >= 2) best_ms = std::min(best_ms, ms);
  }
  for (void* p : {a, b, c}) memory.release(p);
  memory.trim();
  return 2.0 * double(n) * double(n) * double(n) / (double(best_ms) * 1e-3);
}

}  // namespace mh::kernels
