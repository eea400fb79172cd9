// Kernels "timed_kernels": host seconds spent in each op of the kernels
// component it wraps, logged per rank when the rank's instance is destroyed.
#include <megahost/plugin.hpp>

#include <chrono>
#include <map>
#include <sstream>
#include <string>

namespace {

class TimedKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  static constexpr uint64_t capabilities = MH_KERNELS_CAP_PARTIAL_SOFTMAX;  // forwarded
  static constexpr MH_OptionSpec options[] = {
      mh::opt("inner", MH_VALUE_STRING, nullptr, "the kernels component to time", MH_OPTION_INNER),
  };

  explicit TimedKernels(const mh::CreateContext& ctx)
      : inner_(MH_KIND_KERNELS, ctx.options.get_string("inner"), ctx, ctx.inner_options), rank_(ctx.rank) {}
  ~TimedKernels() {
    std::ostringstream line;
    line << "timed_kernels rank " << rank_ << " over " << inner_.name() << ":";
    for (const auto& [op, s] : seconds_) line << " " << op << "=" << s << "s";
    mh::log(MH_LOG_INFO, line.str());
  }

  void device_info(MH_DeviceInfo& out) { mh::check(inner_.api().device_info(inner_.get(), &out)); }
  void* alloc(uint64_t bytes) {
    void* p = nullptr;
    mh::check(inner_.api().alloc(inner_.get(), bytes, &p));
    return p;
  }
  void free(void* p) noexcept { inner_.api().free(inner_.get(), p); }
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) {
    mh::check(inner_.api().copy(inner_.get(), dst, src, bytes, kind));
  }
  void synchronize() { mh::check(inner_.api().synchronize(inner_.get())); }
  // The inner component's stream (NULL if it has none), so collectives stay
  // ordered after the ops this forwards.
  void* stream() {
    const auto* inner = inner_.extension<MH_StreamExtension>(MH_EXTENSION_STREAM);
    return inner != nullptr ? inner->stream(inner_.get()) : nullptr;
  }

#define TIMED(name, Args) \
  void name(const Args& a) { time(#name, &MH_KernelsApi::name, a); }
  TIMED(gemm, MH_GemmArgs)
  TIMED(layernorm, MH_LayerNormArgs)
  TIMED(layernorm_bwd, MH_LayerNormBwdArgs)
  TIMED(elementwise, MH_ElementwiseArgs)
  TIMED(bias_add, MH_BiasArgs)
  TIMED(bias_bwd, MH_BiasArgs)
  TIMED(softmax, MH_SoftmaxArgs)
  TIMED(softmax_bwd, MH_SoftmaxArgs)
  TIMED(dropout, MH_DropoutArgs)
  TIMED(dropout_bwd, MH_DropoutArgs)
  TIMED(embedding, MH_EmbeddingArgs)
  TIMED(embedding_bwd, MH_EmbeddingArgs)
  TIMED(xent, MH_XentArgs)
  TIMED(adamw, MH_AdamWArgs)
  TIMED(sum_squares, MH_SumSquaresArgs)
  TIMED(rmsnorm, MH_RmsNormArgs)
  TIMED(rmsnorm_bwd, MH_RmsNormBwdArgs)
  TIMED(rope, MH_RopeArgs)
  TIMED(swiglu, MH_SwigluArgs)
  TIMED(swiglu_bwd, MH_SwigluArgs)
  TIMED(strided_copy, MH_StridedCopyArgs)
  TIMED(attention, MH_AttentionArgs)
  TIMED(attention_bwd, MH_AttentionArgs)
#undef TIMED

 private:
  template <class Args>
  void time(const char* name, MH_Error* (*const MH_KernelsApi::*op)(MH_Instance*, const Args*), const Args& a) {
    const auto fn = inner_.api().*op;  // NULL when the inner component leaves the op out
    mh::require(fn != nullptr, inner_.name() + " has no " + name, MH_UNIMPLEMENTED);
    const auto start = std::chrono::steady_clock::now();
    mh::check(fn(inner_.get(), &a));
    seconds_[name] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  mh::InnerComponent<MH_KernelsApi> inner_;
  int32_t rank_;
  std::map<std::string, double> seconds_;
};

}  // namespace

MH_PLUGIN("timed_kernels", "1.0.0",
          mh::component<TimedKernels>("timed_kernels", "1.0.0", "host seconds per op of the kernels it wraps",
                                      TimedKernels::options))
