#include "cpu_kernels.hpp"

#include "alloc_size.hpp"
#include "machine.hpp"
#include "ops/ops.hpp"
#include "validate.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mh::kernels {
namespace {

constexpr MH_DType kCompute = MH_F32;

float* f32(const MH_Tensor& t) { return static_cast<float*>(t.data); }
const int32_t* i32(const MH_Tensor& t) { return static_cast<const int32_t*>(t.data); }
uint8_t* u8(const MH_Tensor& t) { return static_cast<uint8_t*>(t.data); }

// Best of three 1024^3 products (2.1 GFLOP each, tens of ms on one core):
// the first one also pays for BLAS's buffers and the team's start.
double measure_peak_flops(int threads) {
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    cpu::gemm(1, n, n, n, 1.0f, {a.data(), 0, n, false}, {b.data(), 0, n, false}, 0.0f, c.data(), 0, n, threads);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * n * n * n / best;
}

}  // namespace

CpuKernels::CpuKernels(const CreateContext& ctx) : ranks_in_process_(std::max(1, ctx.ranks_in_process)) {
#ifdef MH_KERNELS_CPU_AVX2
  require(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
          "kernels 'cpu' was built for AVX2 and FMA, which this CPU lacks; rebuild it with "
          "-DMEGAHOST_KERNELS_CPU_AVX2=OFF",
          MH_UNAVAILABLE);
#endif
  const int64_t threads = ctx.options.get_int("threads");
  threads_ = threads > 0 ? static_cast<int>(threads) : std::max(1, cpu::physical_cores() / ranks_in_process_);
  // OpenBLAS's thread count is process-global, while ranks live as threads
  // of one process and each sizes its own team. So every BLAS call runs
  // single-threaded on the thread that makes it, and the rank's OpenMP team
  // makes the calls in parallel (ops/gemm.cpp). Every instance sets the same
  // value, so instances never fight over it.
  openblas_set_num_threads(1);
  const double gflops = ctx.options.get_double("peak_gflops");
  peak_flops_ = gflops > 0 ? gflops * 1e9 : measure_peak_flops(threads_);
  name_ = "cpu: " + cpu::cpu_model() + ", " + std::to_string(threads_) + " threads (OpenBLAS " +
          openblas_get_corename() + ")";
}

// Memory is the host's RAM, shared by the ranks of this process: each
// reports its share.
void CpuKernels::device_info(MH_DeviceInfo& out) const {
  out.device_type = MH_DEVICE_CPU;
  out.threads = threads_;
  out.name = name_.c_str();
  out.peak_flops = peak_flops_;
  out.memory_bytes = cpu::physical_memory_bytes() / static_cast<uint64_t>(ranks_in_process_);
  out.compute_dtype = kCompute;
  out.dry = 0;
}

// Freed blocks are kept for reuse (block_cache.hpp says why).
void* CpuKernels::alloc(uint64_t bytes) {
  void* ptr = memory_.alloc(alloc_size(bytes));
  require(ptr != nullptr, "alloc: cannot allocate " + std::to_string(bytes) + " bytes of host memory",
          MH_RESOURCE_EXHAUSTED);
  return ptr;
}

void CpuKernels::free(void* ptr) noexcept { memory_.free(ptr); }

// Every kind is a host-to-host copy here; like cudaMemcpy, the two ranges
// must not overlap.
void CpuKernels::copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) {
  check_copy(dst, src, bytes, kind);
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuKernels::gemm(const MH_GemmArgs& args) {
  const GemmDims d = check_gemm(args, kCompute);
  cpu::gemm(d.batch, d.m, d.n, d.k, args.alpha, {f32(args.a), args.a.strides[0], args.a.strides[1], args.trans_a != 0},
            {f32(args.b), args.b.strides[0], args.b.strides[1], args.trans_b != 0}, args.beta, f32(args.c),
            args.c.strides[0], args.c.strides[1], threads_);
}

void CpuKernels::layernorm(const MH_LayerNormArgs& args) {
  const Matrix x = check_layernorm(args, kCompute);
  cpu::layernorm_forward(f32(args.out), f32(args.mean), f32(args.rstd), f32(args.x), f32(args.weight),
                         f32(args.bias), x.rows, x.cols, args.eps, threads_);
}

void CpuKernels::layernorm_bwd(const MH_LayerNormBwdArgs& args) {
  const Matrix x = check_layernorm_bwd(args, kCompute);
  cpu::layernorm_backward(f32(args.dx), f32(args.dweight), f32(args.dbias), f32(args.dout), f32(args.x),
                          f32(args.weight), f32(args.mean), f32(args.rstd), x.rows, x.cols, threads_);
}

void CpuKernels::elementwise(const MH_ElementwiseArgs& args) {
  const int64_t n = check_elementwise(args, kCompute);
  float* out = f32(args.out);
  switch (args.op) {
    case MH_GELU: cpu::gelu_forward(out, f32(args.x), n, threads_); break;
    case MH_GELU_BWD: cpu::gelu_backward(out, f32(args.x), f32(args.y), n, threads_); break;
    case MH_SCALE: cpu::scale(out, f32(args.x), args.alpha, n, threads_); break;
    case MH_COPY:
      if (n > 0 && out != args.x.data) std::memcpy(out, args.x.data, static_cast<size_t>(n) * sizeof(float));
      break;
    case MH_FILL: cpu::fill(out, args.alpha, n, threads_); break;
    case MH_ADD: cpu::axpy(out, 1.0f, f32(args.x), f32(args.y), n, threads_); break;
    case MH_AXPY: cpu::axpy(out, args.alpha, f32(args.x), f32(args.y), n, threads_); break;
  }
}

void CpuKernels::bias_add(const MH_BiasArgs& args) {
  const Matrix x = check_bias_add(args, kCompute);
  cpu::bias_forward(f32(args.out), f32(args.x), f32(args.bias), x.rows, x.cols, threads_);
}

void CpuKernels::bias_bwd(const MH_BiasArgs& args) {
  const Matrix dout = check_bias_bwd(args, kCompute);
  cpu::bias_backward(f32(args.bias), f32(args.out), dout.rows, dout.cols, threads_);
}

void CpuKernels::softmax(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax(args, kCompute);
  cpu::softmax_forward(f32(args.out), f32(args.x), args.scale, d.groups, d.seq, threads_);
}

void CpuKernels::softmax_bwd(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax_bwd(args, kCompute);
  cpu::softmax_backward(f32(args.dx), f32(args.out), f32(args.dout), args.scale, d.groups, d.seq, threads_);
}

void CpuKernels::dropout(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout(args, kCompute);
  cpu::dropout_forward(f32(args.out), u8(args.mask), f32(args.x), f32(args.residual), args.p, args.rng, n,
                       threads_);
}

void CpuKernels::dropout_bwd(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout_bwd(args, kCompute);
  cpu::dropout_backward(f32(args.x), f32(args.out), u8(args.mask), args.p, n, threads_);
}

void CpuKernels::embedding(const MH_EmbeddingArgs& args) {
  const EmbeddingDims d = check_embedding(args, kCompute, "embedding");
  cpu::embedding_forward(f32(args.out), f32(args.table), i32(args.ids), args.id_start, args.accumulate != 0,
                         d.tokens, d.rows, d.cols, threads_);
}

void CpuKernels::embedding_bwd(const MH_EmbeddingArgs& args) {
  const EmbeddingDims d = check_embedding(args, kCompute, "embedding_bwd");
  cpu::embedding_backward(f32(args.table), f32(args.out), i32(args.ids), args.id_start, d.tokens, d.rows, d.cols,
                          threads_);
}

void CpuKernels::xent(const MH_XentArgs& args) {
  const Matrix logits = check_xent(args, kCompute);
  switch (args.step) {
    case MH_XENT_MAX: cpu::xent_max(f32(args.row_max), f32(args.logits), logits.rows, logits.cols, threads_); break;
    case MH_XENT_STATS:
      cpu::xent_stats(f32(args.sum_exp), f32(args.target_logit), f32(args.logits), f32(args.row_max),
                      i32(args.targets), args.id_start, logits.rows, logits.cols, threads_);
      break;
    case MH_XENT_BWD:
      cpu::xent_backward(f32(args.logits), f32(args.row_max), f32(args.sum_exp), i32(args.targets), args.id_start,
                         args.scale, logits.rows, logits.cols, threads_);
      break;
  }
}

void CpuKernels::adamw(const MH_AdamWArgs& args) {
  const int64_t n = check_adamw(args);
  cpu::adamw(f32(args.param), f32(args.m), f32(args.v), f32(args.grad), args.lr, args.beta1, args.beta2, args.eps,
             args.weight_decay, args.step, n, threads_);
}

void CpuKernels::sum_squares(const MH_SumSquaresArgs& args) {
  const int64_t n = check_sum_squares(args, kCompute);
  cpu::sum_squares(f32(args.out), f32(args.x), n, threads_);
}

}  // namespace mh::kernels
