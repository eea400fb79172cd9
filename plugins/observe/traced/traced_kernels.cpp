// Kernels "traced": wraps the kernels component its `inner` option names,
// as the host resolved it (MH_HostApi::create_component), forwards
// every call to it and counts them; at destroy it writes the counts. The
// section's other keys are the inner component's options, which the host
// validates and this component forwards untouched:
//
//   [kernels]
//   plugin = "traced"
//   inner = "cpu"
//   threads = 2          # cpu's option
//
// One instance per rank, like every kernels instance (docs/sdk.md,
// "Composition"). It uses the SDK only.
#include <megahost/plugin.hpp>

#include <map>
#include <string>

#include "../summary_file.hpp"

namespace {

class TracedKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  // Forwarded as they are: an inner component without one refuses what it
  // cannot take in its own op, with its own message.
  static constexpr uint64_t capabilities = MH_KERNELS_CAP_PARTIAL_SOFTMAX;
  static constexpr MH_OptionSpec options[] = {
      mh::opt("inner", MH_VALUE_STRING, nullptr, "the kernels component to wrap (its options go in this section)",
              MH_OPTION_INNER),
      mh::opt("counts_dir", MH_VALUE_STRING, "\"\"",
              "folder for traced-rank<R>.tsv (calls per table entry); empty: the log"),
  };

  explicit TracedKernels(const mh::CreateContext& ctx)
      : inner_(MH_KIND_KERNELS, ctx.options.get_string("inner"), ctx, ctx.inner_options),
        dir_(ctx.options.get_string("counts_dir")),
        rank_(ctx.rank) {}

  ~TracedKernels() {
    std::string text = "entry\tcalls\n";
    for (const auto& [name, n] : calls_) text += name + "\t" + std::to_string(n) + "\n";
    try {
      mh::observe::write_summary(dir_, "traced", rank_, text);
    } catch (const std::exception& e) {
      mh::log(MH_LOG_WARNING, e.what());
    }
  }

  void device_info(MH_DeviceInfo& out) {
    ++calls_["device_info"];
    mh::check(inner_.api().device_info(inner_.get(), &out));
  }
  void* alloc(uint64_t bytes) {
    ++calls_["alloc"];
    void* p = nullptr;
    mh::check(inner_.api().alloc(inner_.get(), bytes, &p));
    return p;
  }
  void free(void* p) noexcept {
    ++calls_["free"];
    inner_.api().free(inner_.get(), p);
  }
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) {
    ++calls_["copy"];
    mh::check(inner_.api().copy(inner_.get(), dst, src, bytes, kind));
  }
  void synchronize() {
    ++calls_["synchronize"];
    mh::check(inner_.api().synchronize(inner_.get()));
  }
  // The inner component's stream, so the host orders collectives after the
  // ops it forwards. The extension chain is static, so traced always has
  // one; NULL when the inner component runs each op before returning.
  void* stream() {
    const auto* inner = inner_.extension<MH_StreamExtension>(MH_EXTENSION_STREAM);
    return inner != nullptr ? inner->stream(inner_.get()) : nullptr;
  }

#define TRACED_OP(name, Args) \
  void name(const Args& a) { forward(#name, &MH_KernelsApi::name, a); }
  TRACED_OP(gemm, MH_GemmArgs)
  TRACED_OP(layernorm, MH_LayerNormArgs)
  TRACED_OP(layernorm_bwd, MH_LayerNormBwdArgs)
  TRACED_OP(elementwise, MH_ElementwiseArgs)
  TRACED_OP(bias_add, MH_BiasArgs)
  TRACED_OP(bias_bwd, MH_BiasArgs)
  TRACED_OP(softmax, MH_SoftmaxArgs)
  TRACED_OP(softmax_bwd, MH_SoftmaxArgs)
  TRACED_OP(dropout, MH_DropoutArgs)
  TRACED_OP(dropout_bwd, MH_DropoutArgs)
  TRACED_OP(embedding, MH_EmbeddingArgs)
  TRACED_OP(embedding_bwd, MH_EmbeddingArgs)
  TRACED_OP(xent, MH_XentArgs)
  TRACED_OP(adamw, MH_AdamWArgs)
  TRACED_OP(sum_squares, MH_SumSquaresArgs)
  TRACED_OP(rmsnorm, MH_RmsNormArgs)
  TRACED_OP(rmsnorm_bwd, MH_RmsNormBwdArgs)
  TRACED_OP(rope, MH_RopeArgs)
  TRACED_OP(swiglu, MH_SwigluArgs)
  TRACED_OP(swiglu_bwd, MH_SwigluArgs)
  TRACED_OP(strided_copy, MH_StridedCopyArgs)
  TRACED_OP(attention, MH_AttentionArgs)
  TRACED_OP(attention_bwd, MH_AttentionArgs)
#undef TRACED_OP

 private:
  // The table the host hands over is in its own layout: an op the inner
  // component leaves out (abi.h allows the model-family ops to) reads NULL.
  template <class Args>
  void forward(const char* name, MH_Error* (*const MH_KernelsApi::*op)(MH_Instance*, const Args*), const Args& a) {
    ++calls_[name];
    const auto fn = inner_.api().*op;
    mh::require(fn != nullptr, "kernels '" + inner_.name() + "' (wrapped by 'traced') has no " + name,
                MH_UNIMPLEMENTED);
    mh::check(fn(inner_.get(), &a));
  }

  mh::InnerComponent<MH_KernelsApi> inner_;
  std::string dir_;
  int32_t rank_;
  std::map<std::string, int64_t> calls_;
};

}  // namespace

MH_PLUGIN("traced", "1.0.0",
          mh::component<TracedKernels>("traced", "1.0.0", "counts every call it forwards to another kernels component",
                                       TracedKernels::options))
