#include "cpu_kernels.hpp"

#include "alloc_size.hpp"
#include "f32_staging.hpp"
#include "machine.hpp"
#include "ops/ops.hpp"
#include "validate.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mh::kernels {
namespace {

float* f32(const MH_Tensor& t) { return static_cast<float*>(t.data); }
const int32_t* i32(const MH_Tensor& t) { return static_cast<const int32_t*>(t.data); }
uint8_t* u8(const MH_Tensor& t) { return static_cast<uint8_t*>(t.data); }

}  // namespace

const char* cpu::plugin_description() {
  static const std::string text = "host memory, OpenBLAS sgemm and vectorised OpenMP ops; fp32, or bf16 with GEMMs on " +
                                  std::string(describe(detect_bf16_units()));
  return text.c_str();
}

CpuKernels::CpuKernels(const CreateContext& ctx)
    : compute_(ctx.options.get_string("dtype") == "bf16" ? MH_BF16 : MH_F32),
      ranks_in_process_(std::max(1, ctx.ranks_in_process)) {
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
  const double memory_gb = ctx.options.get_double("memory_gb");
  memory_bytes_ = memory_gb > 0 ? uint64_t(memory_gb * double(uint64_t{1} << 30))
                                : cpu::physical_memory_bytes() / static_cast<uint64_t>(ranks_in_process_);
  const double gflops = ctx.options.get_double("peak_gflops");
  peak_flops_ = gflops > 0 ? gflops * 1e9 : cpu::theoretical_peak_flops(threads_);
  name_ = "cpu: " + cpu::cpu_model() + ", " + std::to_string(threads_) + " threads (OpenBLAS " +
          openblas_get_corename() + ")";
  if (compute_ == MH_BF16) {
    const cpu::Bf16Units units =
        ctx.options.get_string("bf16_gemm") == "f32" ? cpu::Bf16Units::kNone : cpu::detect_bf16_units();
    if (units != cpu::Bf16Units::kNone) bf16_gemm_.emplace(threads_);
    name_ += ", bf16 GEMM: " + std::string(cpu::describe(units));
  }
}

// Memory is the host's RAM, shared by the ranks of this process: each
// reports its share.
void CpuKernels::device_info(MH_DeviceInfo& out) const {
  out.device_type = MH_DEVICE_CPU;
  out.threads = threads_;
  out.name = name_.c_str();
  out.peak_flops = peak_flops_;
  out.memory_bytes = memory_bytes_;
  out.compute_dtype = compute_;
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
  const GemmDims d = check_gemm(args, compute_);
  if (bf16_gemm_ && bf16_gemm_->run(args, d)) return;
  cpu::F32Staging s(threads_);
  if (args.b.dtype == MH_BF16 && cpu::streams_b(d.m, args.trans_a != 0, args.trans_b != 0)) {
    // A decode step's weight, read in bf16 as stored (only a and c are staged).
    cpu::gemm_bf16_b(d.batch, d.m, d.n, d.k, args.alpha,
                     {s.in(args.a), args.a.strides[0], args.a.strides[1], args.trans_a != 0},
                     {static_cast<const uint16_t*>(args.b.data), args.b.strides[0], args.b.strides[1], true},
                     args.beta, s.out(args.c), args.c.strides[0], args.c.strides[1], threads_);
    s.write_back();
    return;
  }
  cpu::gemm(d.batch, d.m, d.n, d.k, args.alpha, {s.in(args.a), args.a.strides[0], args.a.strides[1], args.trans_a != 0},
            {s.in(args.b), args.b.strides[0], args.b.strides[1], args.trans_b != 0}, args.beta, s.out(args.c),
            args.c.strides[0], args.c.strides[1], threads_);
  s.write_back();
}

void CpuKernels::layernorm(const MH_LayerNormArgs& args) {
  const Matrix x = check_layernorm(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::layernorm_forward(s.out(args.out), f32(args.mean), f32(args.rstd), s.in(args.x), s.in(args.weight),
                         s.in(args.bias), x.rows, x.cols, args.eps, threads_);
  s.write_back();
}

void CpuKernels::layernorm_bwd(const MH_LayerNormBwdArgs& args) {
  const Matrix x = check_layernorm_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::layernorm_backward(s.out(args.dx), s.out(args.dweight), s.out(args.dbias), s.in(args.dout), s.in(args.x),
                          s.in(args.weight), f32(args.mean), f32(args.rstd), x.rows, x.cols, threads_);
  s.write_back();
}

void CpuKernels::elementwise(const MH_ElementwiseArgs& args) {
  const int64_t n = check_elementwise(args, compute_);
  cpu::F32Staging s(threads_);
  float* out = s.out(args.out);
  switch (args.op) {
    case MH_GELU: cpu::gelu_forward(out, s.in(args.x), n, threads_); break;
    case MH_GELU_BWD: cpu::gelu_backward(out, s.in(args.x), s.in(args.y), n, threads_); break;
    case MH_SCALE: cpu::scale(out, s.in(args.x), args.alpha, n, threads_); break;
    case MH_COPY:
      // Between dtypes the staging converts: x is read as f32, out rounded back.
      if (const float* x = s.in(args.x); n > 0 && out != x) std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      break;
    case MH_FILL: cpu::fill(out, args.alpha, n, threads_); break;
    case MH_ADD: cpu::axpy(out, 1.0f, s.in(args.x), s.in(args.y), n, threads_); break;
    case MH_AXPY: cpu::axpy(out, args.alpha, s.in(args.x), s.in(args.y), n, threads_); break;
  }
  s.write_back();
}

void CpuKernels::bias_add(const MH_BiasArgs& args) {
  const Matrix x = check_bias_add(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::bias_forward(s.out(args.out), s.in(args.x), s.in(args.bias), x.rows, x.cols, threads_);
  s.write_back();
}

void CpuKernels::bias_bwd(const MH_BiasArgs& args) {
  const Matrix dout = check_bias_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::bias_backward(s.out(args.bias), s.in(args.out), dout.rows, dout.cols, threads_);
  s.write_back();
}

void CpuKernels::softmax(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::softmax_forward(s.out(args.out), s.in(args.x), args.scale, d.groups, d.rows, d.cols, threads_);
  s.write_back();
}

void CpuKernels::softmax_bwd(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::softmax_backward(s.out(args.dx), s.in(args.out), s.in(args.dout), args.scale, d.groups, d.rows, d.cols,
                        threads_);
  s.write_back();
}

void CpuKernels::dropout(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::dropout_forward(s.out(args.out), u8(args.mask), s.in(args.x), s.in(args.residual), args.p, args.rng, n,
                       threads_);
  s.write_back();
}

void CpuKernels::dropout_bwd(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::dropout_backward(s.out(args.x), s.in(args.out), u8(args.mask), args.p, n, threads_);
  s.write_back();
}

void CpuKernels::embedding(const MH_EmbeddingArgs& args) {
  const EmbeddingDims d = check_embedding(args, compute_, "embedding");
  cpu::F32Staging s(threads_);
  if (args.table.dtype == MH_BF16)
    cpu::embedding_forward_bf16(s.out(args.out), static_cast<const uint16_t*>(args.table.data), i32(args.ids),
                                args.id_start, args.accumulate != 0, d.tokens, d.rows, d.cols, threads_);
  else
    cpu::embedding_forward(s.out(args.out), s.in(args.table), i32(args.ids), args.id_start, args.accumulate != 0,
                           d.tokens, d.rows, d.cols, threads_);
  s.write_back();
}

void CpuKernels::embedding_bwd(const MH_EmbeddingArgs& args) {
  const EmbeddingDims d = check_embedding(args, compute_, "embedding_bwd");
  cpu::F32Staging s(threads_);
  cpu::embedding_backward(s.out(args.table), s.in(args.out), i32(args.ids), args.id_start, d.tokens, d.rows, d.cols,
                          threads_);
  s.write_back();
}

void CpuKernels::xent(const MH_XentArgs& args) {
  const XentDims d = check_xent(args, compute_);
  cpu::F32Staging s(threads_);
  switch (args.step) {
    case MH_XENT_MAX: cpu::xent_max(f32(args.row_max), s.in(args.logits), d.rows, d.cols, d.in_vocab, threads_); break;
    case MH_XENT_STATS:
      cpu::xent_stats(f32(args.sum_exp), f32(args.target_logit), s.in(args.logits), f32(args.row_max),
                      i32(args.targets), args.id_start, d.rows, d.cols, d.in_vocab, threads_);
      break;
    case MH_XENT_BWD:
      cpu::xent_backward(s.out(args.logits), f32(args.row_max), f32(args.sum_exp), i32(args.targets), args.id_start,
                         args.scale, d.rows, d.cols, d.in_vocab, threads_);
      break;
  }
  s.write_back();
}

void CpuKernels::adamw(const MH_AdamWArgs& args) {
  const int64_t n = check_adamw(args);
  cpu::adamw(f32(args.param), f32(args.m), f32(args.v), f32(args.grad), args.lr, args.beta1, args.beta2, args.eps,
             args.weight_decay, args.step, n, threads_);
}

void CpuKernels::sum_squares(const MH_SumSquaresArgs& args) {
  const int64_t n = check_sum_squares(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::sum_squares(f32(args.out), s.in(args.x), n, threads_);
}

void CpuKernels::rmsnorm(const MH_RmsNormArgs& args) {
  const Matrix x = check_rmsnorm(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::rmsnorm_forward(s.out(args.out), f32(args.rstd), s.in(args.x), f32(args.weight), x.rows, x.cols, args.eps,
                       threads_);
  s.write_back();
}

void CpuKernels::rmsnorm_bwd(const MH_RmsNormBwdArgs& args) {
  const Matrix x = check_rmsnorm_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::rmsnorm_backward(f32(args.dx), f32(args.dweight), s.in(args.dout), s.in(args.x), f32(args.weight),
                        f32(args.rstd), x.rows, x.cols, threads_);
}

void CpuKernels::rope(const MH_RopeArgs& args) {
  const RopeDims d = check_rope(args, compute_);
  cpu::F32Staging s(threads_);
  const float* x = s.in(args.x);
  cpu::rope(s.out(args.out), {args.out.strides[0], args.out.strides[1]}, x, {args.x.strides[0], args.x.strides[1]},
            d.groups, d.seq, d.dim, args.position_offset, args.theta, args.inverse != 0, threads_);
  s.write_back();
}

void CpuKernels::swiglu(const MH_SwigluArgs& args) {
  const SwigluDims d = check_swiglu(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::swiglu_forward(s.out(args.out), s.in(args.x), args.x.strides[0], d.rows, d.ffn, threads_);
  s.write_back();
}

void CpuKernels::swiglu_bwd(const MH_SwigluArgs& args) {
  const SwigluDims d = check_swiglu_bwd(args, compute_);
  cpu::F32Staging s(threads_);
  cpu::swiglu_backward(s.out(args.dx), args.dx.strides[0], s.in(args.x), args.x.strides[0], s.in(args.dout), d.rows,
                       d.ffn, threads_);
  s.write_back();
}

// A byte copy in every dtype: no staging through f32.
void CpuKernels::strided_copy(const MH_StridedCopyArgs& args) {
  const StridedCopyDims d = check_strided_copy(args);
  cpu::strided_copy(args.out.data, {args.out.strides[0], args.out.strides[1]}, args.x.data,
                    {args.x.strides[0], args.x.strides[1]}, d.groups, d.rows, d.cols * d.element_bytes,
                    d.element_bytes, threads_);
}

}  // namespace mh::kernels
