#include "cpu_kernels.hpp"

#include "alloc_size.hpp"
#include "bf16_rows.hpp"
#include "f32_staging.hpp"
#include "machine.hpp"
#include "ops/ops.hpp"
#include "validate.hpp"

#include <cblas.h>

#include <megahost/struct_size.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mh::kernels {
namespace {

using cpu::flat;
using cpu::rows_of;

float* f32(const MH_Tensor& t) { return static_cast<float*>(t.data); }
const int32_t* i32(const MH_Tensor& t) { return static_cast<const int32_t*>(t.data); }
uint8_t* u8(const MH_Tensor& t) { return static_cast<uint8_t*>(t.data); }

// The GEMM peak of the units that run the compute dtype's GEMMs, as a
// multiple of the f32 FMA peak: vdpbf16ps does two multiply-adds a lane where
// an f32 FMA does one; an AMX tile multiply, 1024 bf16 FLOPs a cycle and core
// against 64 for two 16-lane FMA units.
double bf16_peak_factor(cpu::Bf16Units units) {
  switch (units) {
    case cpu::Bf16Units::kAmx: return 16.0;
    case cpu::Bf16Units::kAvx512Bf16: return 2.0;
    case cpu::Bf16Units::kNone: break;
  }
  return 1.0;
}

// The packed-documents table of MH_SoftmaxArgs.starts or MH_RopeArgs.positions
// (validated: absent or [B, cols] with B dividing groups), as the row of
// group g, or NULL.
const int32_t* sample_row(const MH_Tensor& t, int64_t groups, int64_t g) {
  if (t.data == nullptr) return nullptr;
  return i32(t) + (g / (groups / t.shape[0])) * t.shape[1];
}

template <class Args>
MH_Tensor documents(const Args& args, MH_Tensor Args::*member) {
  return reaches(args, member) ? args.*member : MH_Tensor{};
}

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
  name_ = "cpu: " + cpu::cpu_model() + ", " + std::to_string(threads_) + " threads (OpenBLAS " +
          openblas_get_corename() + ")";
  cpu::Bf16Units units = cpu::Bf16Units::kNone;
  if (compute_ == MH_BF16) {
    if (ctx.options.get_string("bf16_gemm") != "f32") units = cpu::detect_bf16_units();
    if (units != cpu::Bf16Units::kNone) bf16_gemm_.emplace(threads_);
    name_ += ", bf16 GEMM: " + std::string(cpu::describe(units));
  }
  const double gflops = ctx.options.get_double("peak_gflops");
  peak_flops_ = gflops > 0 ? gflops * 1e9 : cpu::theoretical_peak_flops(threads_) * bf16_peak_factor(units);
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
  const GemmDims d = check_gemm(args, target());
  const bool streams_b = args.b.dtype == MH_BF16 && cpu::streams_b(d.m, args.trans_a != 0, args.trans_b != 0);
  // One row against a weight (single-stream decode) reads the weight once at
  // memory speed on the streaming kernel, where oneDNN would pack it first
  // (docs/kernels-cpu.md); from two rows on, the bf16 units win.
  if (bf16_gemm_ && !(streams_b && d.m == 1) && bf16_gemm_->run(args, d)) return;
  cpu::F32Staging s(threads_);
  if (bf16_gemm_ && streams_b && d.m == 1 && args.a.dtype == MH_BF16) {
    // The same stream on the bf16 dot-product units: no operand widened.
    cpu::row_times_transposed_on_bf16_units(
        d.batch, d.n, d.k, args.alpha, {static_cast<const uint16_t*>(args.a.data), args.a.strides[0], 0, false},
        {static_cast<const uint16_t*>(args.b.data), args.b.strides[0], args.b.strides[1], true}, args.beta,
        s.out(args.c), args.c.strides[0], threads_);
    s.write_back();
    return;
  }
  if (streams_b) {
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

// The ops below run their f32 loop straight on f32 tensors and in blocks of
// rows when any tensor is bf16 (bf16_rows.hpp): blocks[i] is the i-th view
// of the list over the block's rows.

void CpuKernels::layernorm(const MH_LayerNormArgs& args) {
  const Matrix x = check_layernorm(args, target());
  const int64_t C = x.cols;
  const cpu::F32Vector weight(args.weight, C), bias(args.bias, C);
  float* mean = f32(args.mean);
  float* rstd = f32(args.rstd);
  cpu::for_row_blocks<2>(threads_, 1, x.rows, {rows_of(args.out, C, C, false, true), rows_of(args.x, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t r0, int64_t n, int) {
                           cpu::layernorm_forward(b[0].data, mean + r0, rstd + r0, b[1].data, weight.get(),
                                                  bias.get(), n, C, args.eps, 1);
                         });
}

void CpuKernels::layernorm_bwd(const MH_LayerNormBwdArgs& args) {
  const Matrix x = check_layernorm_bwd(args, target());
  const int64_t C = x.cols;
  const cpu::F32Vector weight(args.weight, C);
  cpu::Partials dweight(threads_, C), dbias(threads_, C);
  const float* mean = f32(args.mean);
  const float* rstd = f32(args.rstd);
  cpu::for_row_blocks<3>(threads_, 1, x.rows,
                         {rows_of(args.dx, C, C, true, true), rows_of(args.dout, C, C, true, false),
                          rows_of(args.x, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t r0, int64_t n, int t) {
                           cpu::layernorm_backward(b[0].data, dweight.of(t), dbias.of(t), b[1].data, b[2].data,
                                                   weight.get(), mean + r0, rstd + r0, n, C, 1);
                         });
  dweight.add_into(args.dweight);
  dbias.add_into(args.dbias);
}

void CpuKernels::elementwise(const MH_ElementwiseArgs& args) {
  const int64_t n = check_elementwise(args, target());
  if (args.op == MH_COPY) return cpu::convert(args.out.data, args.out.dtype, args.x.data, args.x.dtype, n, threads_);
  const float alpha = args.alpha;
  const std::array<cpu::FlatView, 3> views{flat(args.out, false, true), flat(args.x, true, false),
                                           flat(args.y, true, false)};
  cpu::for_flat_blocks(threads_, n, views, [&](auto& b, int64_t, int64_t count, int) {
    float* out = b[0].data;
    switch (args.op) {
      case MH_GELU: cpu::gelu_forward(out, b[1].data, count, 1); break;
      case MH_GELU_BWD: cpu::gelu_backward(out, b[1].data, b[2].data, count, 1); break;
      case MH_SCALE: cpu::scale(out, b[1].data, alpha, count, 1); break;
      case MH_FILL: cpu::fill(out, alpha, count, 1); break;
      case MH_ADD: cpu::axpy(out, 1.0f, b[1].data, b[2].data, count, 1); break;
      case MH_AXPY: cpu::axpy(out, alpha, b[1].data, b[2].data, count, 1); break;
      case MH_COPY: break;
    }
  });
}

void CpuKernels::bias_add(const MH_BiasArgs& args) {
  const Matrix x = check_bias_add(args, target());
  const int64_t C = x.cols;
  const cpu::F32Vector bias(args.bias, C);
  cpu::for_row_blocks<2>(threads_, 1, x.rows, {rows_of(args.out, C, C, false, true), rows_of(args.x, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t, int64_t n, int) {
                           cpu::bias_forward(b[0].data, b[1].data, bias.get(), n, C, 1);
                         });
}

void CpuKernels::bias_bwd(const MH_BiasArgs& args) {
  const Matrix dout = check_bias_bwd(args, target());
  const int64_t C = dout.cols;
  cpu::Partials dbias(threads_, C);
  cpu::for_row_blocks<1>(threads_, 1, dout.rows, {rows_of(args.out, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t, int64_t n, int t) {
                           cpu::bias_backward(dbias.of(t), b[0].data, n, C, 1);
                         });
  dbias.add_into(args.bias);
}

void CpuKernels::softmax(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax(args, target());
  const int64_t Q = d.rows, T = d.cols;
  const MH_Tensor starts = documents(args, &MH_SoftmaxArgs::starts);
  cpu::for_row_blocks<2>(threads_, d.groups, Q,
                         {rows_of(args.out, T, T, false, true, Q * T), rows_of(args.x, T, T, true, false, Q * T)},
                         [&](auto& b, int64_t g, int64_t r0, int64_t n, int) {
                           cpu::softmax_forward(b[0].data, b[1].data, args.scale, 1, n, T, Q - r0 - n,
                                                sample_row(starts, d.groups, g), 1);
                         });
}

void CpuKernels::softmax_bwd(const MH_SoftmaxArgs& args) {
  const SoftmaxDims d = check_softmax_bwd(args, target());
  const int64_t Q = d.rows, T = d.cols;
  const MH_Tensor starts = documents(args, &MH_SoftmaxArgs::starts);
  cpu::for_row_blocks<3>(threads_, d.groups, Q,
                         {rows_of(args.dx, T, T, false, true, Q * T), rows_of(args.out, T, T, true, false, Q * T),
                          rows_of(args.dout, T, T, true, false, Q * T)},
                         [&](auto& b, int64_t g, int64_t r0, int64_t n, int) {
                           cpu::softmax_backward(b[0].data, b[1].data, b[2].data, args.scale, 1, n, T, Q - r0 - n,
                                                 sample_row(starts, d.groups, g), 1);
                         });
}

void CpuKernels::dropout(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout(args, target());
  uint8_t* mask = u8(args.mask);
  const std::array<cpu::FlatView, 3> views{flat(args.out, false, true), flat(args.x, true, false),
                                           flat(args.residual, true, false)};
  cpu::for_flat_blocks(threads_, n, views, [&](auto& b, int64_t first, int64_t count, int) {
    cpu::dropout_forward(b[0].data, mask + first, b[1].data, b[2].data, args.p, args.rng, first, count, 1);
  });
}

void CpuKernels::dropout_bwd(const MH_DropoutArgs& args) {
  const int64_t n = check_dropout_bwd(args, target());
  const uint8_t* mask = u8(args.mask);
  const std::array<cpu::FlatView, 2> views{flat(args.x, false, true), flat(args.out, true, false)};
  cpu::for_flat_blocks(threads_, n, views, [&](auto& b, int64_t first, int64_t count, int) {
    cpu::dropout_backward(b[0].data, b[1].data, mask + first, args.p, count, 1);
  });
}

void CpuKernels::embedding(const MH_EmbeddingArgs& args) {
  const EmbeddingDims d = check_embedding(args, target(), "embedding");
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
  const EmbeddingDims d = check_embedding(args, target(), "embedding_bwd");
  cpu::F32Staging s(threads_);
  cpu::embedding_backward(s.out(args.table), s.in(args.out), i32(args.ids), args.id_start, d.tokens, d.rows, d.cols,
                          threads_);
  s.write_back();
}

void CpuKernels::xent(const MH_XentArgs& args) {
  const XentDims d = check_xent(args, target());
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
  const int64_t n = check_adamw(args, target());
  cpu::adamw(f32(args.param), f32(args.m), f32(args.v), f32(args.grad), args.lr, args.beta1, args.beta2, args.eps,
             args.weight_decay, args.step, n, threads_);
}

void CpuKernels::sum_squares(const MH_SumSquaresArgs& args) {
  const int64_t n = check_sum_squares(args, target());
  cpu::F32Staging s(threads_);
  cpu::sum_squares(f32(args.out), s.in(args.x), n, threads_);
}

void CpuKernels::rmsnorm(const MH_RmsNormArgs& args) {
  const Matrix x = check_rmsnorm(args, target());
  const int64_t C = x.cols;
  float* rstd = f32(args.rstd);
  cpu::for_row_blocks<2>(threads_, 1, x.rows, {rows_of(args.out, C, C, false, true), rows_of(args.x, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t r0, int64_t n, int) {
                           cpu::rmsnorm_forward(b[0].data, rstd + r0, b[1].data, f32(args.weight), n, C, args.eps, 1);
                         });
}

void CpuKernels::rmsnorm_bwd(const MH_RmsNormBwdArgs& args) {
  const Matrix x = check_rmsnorm_bwd(args, target());
  const int64_t C = x.cols;
  cpu::Partials dweight(threads_, C);
  const float* rstd = f32(args.rstd);
  float* dx = f32(args.dx);
  cpu::for_row_blocks<2>(threads_, 1, x.rows, {rows_of(args.dout, C, C, true, false), rows_of(args.x, C, C, true, false)},
                         [&](auto& b, int64_t, int64_t r0, int64_t n, int t) {
                           cpu::rmsnorm_backward(dx + r0 * C, dweight.of(t), b[0].data, b[1].data, f32(args.weight),
                                                 rstd + r0, n, C, 1);
                         });
  dweight.add_into(args.dweight);
}

void CpuKernels::rope(const MH_RopeArgs& args) {
  const RopeDims d = check_rope(args, target());
  const MH_Tensor positions = documents(args, &MH_RopeArgs::positions);
  // The table holds every position a row is at: 0 .. S - 1, or up to the
  // largest of `positions`.
  int64_t rows = d.seq;
  if (positions.data != nullptr) {
    const int32_t* p = i32(positions);
    const auto [low, high] = std::minmax_element(p, p + positions.shape[0] * positions.shape[1]);
    require(positions.shape[1] == 0 || *low >= 0,
            "rope: positions holds " + std::to_string(positions.shape[1] == 0 ? 0 : *low) + ", but positions are >= 0",
            MH_INVALID_ARGUMENT);
    rows = positions.shape[1] == 0 ? 0 : int64_t{*high} + 1;
  }
  const cpu::RotationTable table =
      cpu::rotation_table(rows, d.dim, args.position_offset, args.theta, args.inverse != 0, threads_);
  const std::array<cpu::RowView, 2> views{
      rows_of(args.out, d.dim, args.out.strides[1], false, true, args.out.strides[0]),
      rows_of(args.x, d.dim, args.x.strides[1], true, false, args.x.strides[0])};
  cpu::for_row_blocks(threads_, d.groups, d.seq, views, [&](auto& b, int64_t g, int64_t s0, int64_t n, int) {
    cpu::rope(b[0].data, {0, b[0].ld}, b[1].data, {0, b[1].ld}, 1, n, d.dim, table, s0,
              sample_row(positions, d.groups, g), 1);
  });
}

void CpuKernels::swiglu(const MH_SwigluArgs& args) {
  const SwigluDims d = check_swiglu(args, target());
  const int64_t F = d.ffn;
  cpu::for_row_blocks<2>(threads_, 1, d.rows,
                         {rows_of(args.out, F, F, false, true), rows_of(args.x, 2 * F, args.x.strides[0], true, false)},
                         [&](auto& b, int64_t, int64_t, int64_t n, int) {
                           cpu::swiglu_forward(b[0].data, b[1].data, b[1].ld, n, F, 1);
                         });
}

void CpuKernels::swiglu_bwd(const MH_SwigluArgs& args) {
  const SwigluDims d = check_swiglu_bwd(args, target());
  const int64_t F = d.ffn;
  cpu::for_row_blocks<3>(threads_, 1, d.rows,
                         {rows_of(args.dx, 2 * F, args.dx.strides[0], false, true),
                          rows_of(args.x, 2 * F, args.x.strides[0], true, false), rows_of(args.dout, F, F, true, false)},
                         [&](auto& b, int64_t, int64_t, int64_t n, int) {
                           cpu::swiglu_backward(b[0].data, b[0].ld, b[1].data, b[1].ld, b[2].data, n, F, 1);
                         });
}

// A byte copy in every dtype: no staging through f32.
void CpuKernels::strided_copy(const MH_StridedCopyArgs& args) {
  const StridedCopyDims d = check_strided_copy(args, target());
  cpu::strided_copy(args.out.data, {args.out.strides[0], args.out.strides[1]}, args.x.data,
                    {args.x.strides[0], args.x.strides[1]}, d.groups, d.rows, d.cols * d.element_bytes,
                    d.element_bytes, threads_);
}

namespace {

cpu::AttentionProblem attention_problem(const MH_AttentionArgs& args, const AttentionDims& d) {
  return {args.q,
          args.k,
          args.v,
          args.out,
          args.dout,
          args.dq,
          args.dk,
          args.dv,
          f32(args.lse),
          i32(args.starts),
          args.starts.data != nullptr ? args.starts.shape[0] : 0,
          d.groups,
          d.heads,
          d.sq,
          d.sk,
          d.dim,
          args.q_offset,
          args.scale,
          args.dropout_p,
          args.rng,
          d.rows,
          d.cols,
          d.row0,
          d.col0,
          d.accumulate};
}

}  // namespace

// Tiles are widened from bf16 as they are loaded (ops/attention.cpp), so
// both dtypes take the same f32 loop.
void CpuKernels::attention(const MH_AttentionArgs& args) {
  cpu::attention_forward(attention_problem(args, check_attention(args, target())), threads_);
}

void CpuKernels::attention_bwd(const MH_AttentionArgs& args) {
  cpu::attention_backward(attention_problem(args, check_attention_bwd(args, target())), threads_);
}

}  // namespace mh::kernels
