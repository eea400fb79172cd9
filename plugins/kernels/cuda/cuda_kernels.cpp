#include "cuda_kernels.hpp"

#include <megahost/struct_size.hpp>

#include "cuda_check.hpp"
#include "ops/launch.hpp"
#include "validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace mh::kernels {
namespace {

// Where the engine's ranks are threads of one process, the global rank is
// the local one; under mpirun each process is one rank and OpenMPI says
// which one it is on its node.
int local_rank(const CreateContext& ctx) {
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(local);
  return std::max(0, ctx.rank);
}

int select_device(const CreateContext& ctx) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(MH_UNAVAILABLE, std::string("no CUDA device: ") +
                                    cudaGetErrorString(status != cudaSuccess ? status : cudaErrorNoDevice));
  }
  const int64_t wanted = ctx.options.get_int("device");
  require(wanted < count, ctx.options.key("device") + " = " + std::to_string(wanted) + ", but this machine has " +
                              std::to_string(count) + " CUDA device(s)");
  const int device = wanted >= 0 ? static_cast<int>(wanted) : local_rank(ctx) % count;
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return device;
}

// A blocking stream (not cudaStreamNonBlocking): work a communicator puts on
// the legacy default stream, when it is given no stream, stays ordered with
// the ops.
cudaStream_t make_stream() {
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  return stream;
}

std::string device_name(int device, MH_DType compute) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return std::string("cuda: ") + prop.name + " (device " + std::to_string(device) + ", sm_" +
         std::to_string(prop.major) + std::to_string(prop.minor) + ", " + (compute == MH_BF16 ? "bf16" : "fp32") +
         ")";
}

// The measured peak: 8192^3 (1.1 TFLOP, about a millisecond in bf16 on an
// H100) where its operands (384 MiB in bf16) are small next to the device.
int64_t peak_gemm_size(uint64_t memory_bytes) { return memory_bytes >= (uint64_t{16} << 30) ? 8192 : 2048; }

gpu::Floats floats(const MH_Tensor& t) { return {t.data, t.dtype == MH_BF16}; }
float* f32(const MH_Tensor& t) { return static_cast<float*>(t.data); }
const int32_t* i32(const MH_Tensor& t) { return static_cast<const int32_t*>(t.data); }
uint8_t* u8(const MH_Tensor& t) { return static_cast<uint8_t*>(t.data); }

// The packed-documents table `member` of args (validated: absent, or
// [B, cols] with B dividing groups).
template <class Args>
gpu::SampleTable sample_table(const Args& args, MH_Tensor Args::*member, int64_t groups) {
  if (!reaches(args, member) || (args.*member).data == nullptr) return {nullptr, 1, 0};
  const MH_Tensor& t = args.*member;
  return {i32(t), groups / t.shape[0], t.shape[1]};
}

}  // namespace

CudaKernels::CudaKernels(const CreateContext& ctx)
    : device_(select_device(ctx)),
      compute_(ctx.options.get_string("dtype") == "fp32" ? MH_F32 : MH_BF16),
      stream_(make_stream()),
      memory_(device_),
      blas_(stream_.get()) {
  size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  memory_bytes_ = total;
  const double tflops = ctx.options.get_double("peak_tflops");
  peak_flops_ = tflops > 0 ? tflops * 1e12
                           : measure_gemm_flops(blas_, memory_, stream_.get(), compute_, peak_gemm_size(total));
  name_ = device_name(device_, compute_);
}

CudaKernels::~CudaKernels() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_.get());
  mh::log(MH_LOG_INFO, name_ + ": device memory held at most " + std::to_string(memory_.peak_reserved() >> 20) +
                           " MiB (caching allocator; cuBLAS and the CUDA context not counted)");
}

cudaStream_t CudaKernels::on_device() const {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  return stream_.get();
}

void* CudaKernels::scratch(uint64_t bytes) {
  if (bytes > scratch_bytes_) {
    memory_.release(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    scratch_ = memory_.allocate(bytes);
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void CudaKernels::device_info(MH_DeviceInfo& out) const {
  out.device_type = MH_DEVICE_CUDA;
  out.threads = 1;
  out.name = name_.c_str();
  out.peak_flops = peak_flops_;
  out.memory_bytes = memory_bytes_;
  out.compute_dtype = compute_;
  out.dry = 0;
  out.device_id = device_;
}

void* CudaKernels::alloc(uint64_t bytes) {
  on_device();
  return memory_.allocate(bytes);
}

void CudaKernels::free(void* ptr) noexcept { memory_.release(ptr); }

// Host memory is the caller's again when copy returns, as with the cpu
// kernels, so copies to or from the host wait for the stream.
void CudaKernels::copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) {
  check_copy(dst, src, bytes, kind);
  if (bytes == 0) return;
  static constexpr cudaMemcpyKind kKinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                              cudaMemcpyDeviceToDevice};
  cudaStream_t stream = on_device();
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kKinds[kind], stream), "copy");
  if (kind != MH_DEVICE_TO_DEVICE) check_cuda(cudaStreamSynchronize(stream), "copy");
}

void CudaKernels::synchronize() { check_cuda(cudaStreamSynchronize(on_device()), "synchronize"); }

void CudaKernels::gemm(const MH_GemmArgs& args) {
  const GemmDims d = check_gemm(args, target());
  on_device();
  blas_.gemm(args, d);
}

void CudaKernels::layernorm(const MH_LayerNormArgs& a) {
  const Matrix x = check_layernorm(a, target());
  gpu::layernorm_forward(on_device(), floats(a.out), f32(a.mean), f32(a.rstd), floats(a.x), floats(a.weight),
                         floats(a.bias), x.rows, x.cols, a.eps);
}

void CudaKernels::layernorm_bwd(const MH_LayerNormBwdArgs& a) {
  const Matrix x = check_layernorm_bwd(a, target());
  cudaStream_t stream = on_device();
  gpu::layernorm_backward(stream, floats(a.dx), floats(a.dweight), floats(a.dbias), floats(a.dout), floats(a.x),
                          floats(a.weight), f32(a.mean), f32(a.rstd), x.rows, x.cols,
                          scratch(gpu::column_scratch_bytes(x.cols)));
}

void CudaKernels::elementwise(const MH_ElementwiseArgs& a) {
  const int64_t n = check_elementwise(a, target());
  gpu::elementwise(on_device(), a.op, floats(a.out), floats(a.x), floats(a.y), a.alpha, n);
}

void CudaKernels::bias_add(const MH_BiasArgs& a) {
  const Matrix x = check_bias_add(a, target());
  gpu::bias_forward(on_device(), floats(a.out), floats(a.x), floats(a.bias), x.rows, x.cols);
}

void CudaKernels::bias_bwd(const MH_BiasArgs& a) {
  const Matrix dout = check_bias_bwd(a, target());
  cudaStream_t stream = on_device();
  gpu::bias_backward(stream, floats(a.bias), floats(a.out), dout.rows, dout.cols,
                     scratch(gpu::column_scratch_bytes(dout.cols)));
}

void CudaKernels::softmax(const MH_SoftmaxArgs& a) {
  const SoftmaxDims d = check_softmax(a, target());
  gpu::softmax_forward(on_device(), floats(a.out), floats(a.x), a.scale, d.groups, d.rows, d.cols,
                       sample_table(a, &MH_SoftmaxArgs::starts, d.groups));
}

void CudaKernels::softmax_bwd(const MH_SoftmaxArgs& a) {
  const SoftmaxDims d = check_softmax_bwd(a, target());
  gpu::softmax_backward(on_device(), floats(a.dx), floats(a.out), floats(a.dout), a.scale, d.groups, d.rows, d.cols,
                        sample_table(a, &MH_SoftmaxArgs::starts, d.groups));
}

void CudaKernels::dropout(const MH_DropoutArgs& a) {
  const int64_t n = check_dropout(a, target());
  gpu::dropout_forward(on_device(), floats(a.out), u8(a.mask), floats(a.x), floats(a.residual), a.p, a.rng, n);
}

void CudaKernels::dropout_bwd(const MH_DropoutArgs& a) {
  const int64_t n = check_dropout_bwd(a, target());
  gpu::dropout_backward(on_device(), floats(a.x), floats(a.out), u8(a.mask), a.p, n);
}

void CudaKernels::embedding(const MH_EmbeddingArgs& a) {
  const EmbeddingDims d = check_embedding(a, target(), "embedding");
  gpu::embedding_forward(on_device(), floats(a.out), floats(a.table), i32(a.ids), a.id_start, a.accumulate != 0,
                         d.tokens, d.rows, d.cols);
}

void CudaKernels::embedding_bwd(const MH_EmbeddingArgs& a) {
  const EmbeddingDims d = check_embedding(a, target(), "embedding_bwd");
  gpu::embedding_backward(on_device(), floats(a.table), floats(a.out), i32(a.ids), a.id_start, d.tokens, d.rows,
                          d.cols);
}

void CudaKernels::xent(const MH_XentArgs& a) {
  const XentDims d = check_xent(a, target());
  cudaStream_t stream = on_device();
  switch (a.step) {
    case MH_XENT_MAX: gpu::xent_max(stream, f32(a.row_max), floats(a.logits), d.rows, d.cols, d.in_vocab); break;
    case MH_XENT_STATS:
      gpu::xent_stats(stream, f32(a.sum_exp), f32(a.target_logit), floats(a.logits), f32(a.row_max), i32(a.targets),
                      a.id_start, d.rows, d.cols, d.in_vocab);
      break;
    case MH_XENT_BWD:
      gpu::xent_backward(stream, floats(a.logits), f32(a.row_max), f32(a.sum_exp), i32(a.targets), a.id_start,
                         a.scale, d.rows, d.cols, d.in_vocab);
      break;
  }
}

void CudaKernels::adamw(const MH_AdamWArgs& a) {
  const int64_t n = check_adamw(a, target());
  // In double: 1 - 0.999^t loses most of its digits in f32 for small t.
  const auto correction = [&](float beta) {
    return static_cast<float>(1.0 - std::pow(static_cast<double>(beta), static_cast<double>(a.step)));
  };
  gpu::adamw(on_device(), f32(a.param), f32(a.m), f32(a.v), f32(a.grad),
             {a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, correction(a.beta1), correction(a.beta2)}, n);
}

void CudaKernels::sum_squares(const MH_SumSquaresArgs& a) {
  const int64_t n = check_sum_squares(a, target());
  cudaStream_t stream = on_device();
  gpu::sum_squares(stream, f32(a.out), floats(a.x), n, scratch(gpu::kSumScratchBytes));
}

void CudaKernels::rmsnorm(const MH_RmsNormArgs& a) {
  const Matrix x = check_rmsnorm(a, target());
  gpu::rmsnorm_forward(on_device(), floats(a.out), f32(a.rstd), floats(a.x), f32(a.weight), x.rows, x.cols, a.eps);
}

void CudaKernels::rmsnorm_bwd(const MH_RmsNormBwdArgs& a) {
  const Matrix x = check_rmsnorm_bwd(a, target());
  cudaStream_t stream = on_device();
  gpu::rmsnorm_backward(stream, f32(a.dx), f32(a.dweight), floats(a.dout), floats(a.x), f32(a.weight), f32(a.rstd),
                        x.rows, x.cols, scratch(gpu::column_scratch_bytes(x.cols)));
}

void CudaKernels::rope(const MH_RopeArgs& a) {
  const RopeDims d = check_rope(a, target());
  gpu::rope(on_device(), floats(a.out), {a.out.strides[0], a.out.strides[1]}, floats(a.x),
            {a.x.strides[0], a.x.strides[1]}, d.groups, d.seq, d.dim, a.position_offset, a.theta, a.inverse != 0,
            sample_table(a, &MH_RopeArgs::positions, d.groups));
}

void CudaKernels::swiglu(const MH_SwigluArgs& a) {
  const SwigluDims d = check_swiglu(a, target());
  gpu::swiglu_forward(on_device(), floats(a.out), floats(a.x), a.x.strides[0], d.rows, d.ffn);
}

void CudaKernels::swiglu_bwd(const MH_SwigluArgs& a) {
  const SwigluDims d = check_swiglu_bwd(a, target());
  gpu::swiglu_backward(on_device(), floats(a.dx), a.dx.strides[0], floats(a.x), a.x.strides[0], floats(a.dout),
                       d.rows, d.ffn);
}

void CudaKernels::strided_copy(const MH_StridedCopyArgs& a) {
  const StridedCopyDims d = check_strided_copy(a, target());
  gpu::strided_copy(on_device(), a.out.data, {a.out.strides[0], a.out.strides[1]}, a.x.data,
                    {a.x.strides[0], a.x.strides[1]}, d.groups, d.rows, d.cols, d.element_bytes);
}

namespace {

gpu::AttentionView attention_view(const MH_Tensor& t) {
  if (t.ndim == 4) return {t.data, t.dtype == MH_BF16, t.strides[0], t.strides[1], t.strides[2]};
  return {t.data, t.dtype == MH_BF16, t.strides[0], 0, t.strides[1]};
}

gpu::AttentionShape attention_shape(const MH_AttentionArgs& a, const AttentionDims& d) {
  require(d.dim <= 32 * gpu::kLaneElements,
          "attention: head size " + std::to_string(d.dim) + " exceeds the " + std::to_string(32 * gpu::kLaneElements) +
              " the cuda kernel holds per warp",
          MH_UNIMPLEMENTED);
  const bool documents = a.starts.data != nullptr;
  return {d.groups, d.heads, d.sq, d.sk, d.dim, a.q_offset, documents ? i32(a.starts) : nullptr,
          documents ? d.groups / a.starts.shape[0] : 1, a.scale, a.dropout_p, a.rng, d.rows, d.cols, d.row0, d.col0,
          d.accumulate};
}

}  // namespace

void CudaKernels::attention(const MH_AttentionArgs& a) {
  const AttentionDims d = check_attention(a, target());
  gpu::attention_forward(on_device(), attention_shape(a, d), attention_view(a.q), attention_view(a.k),
                         attention_view(a.v), attention_view(a.out), f32(a.lse));
}

void CudaKernels::attention_bwd(const MH_AttentionArgs& a) {
  const AttentionDims d = check_attention_bwd(a, target());
  const gpu::AttentionShape shape = attention_shape(a, d);
  cudaStream_t stream = on_device();
  gpu::attention_backward(stream, shape, attention_view(a.q), attention_view(a.k), attention_view(a.v),
                          attention_view(a.out), attention_view(a.dout), f32(a.lse), attention_view(a.dq),
                          attention_view(a.dk), attention_view(a.dv),
                          static_cast<float*>(scratch(uint64_t(d.groups * d.heads * d.sq) * sizeof(float))));
}

}  // namespace mh::kernels
