// kernels "faulty": a test fixture that computes nothing (every op returns at
// once; memory is real and reads back what was copied in, else zeros) and
// injects one fault into a run. Calls are counted per instance, i.e. per
// rank; from the (after + 1)-th call of `op` on, rank `rank` (-1: every rank)
//   error  returns an MH_INTERNAL error,
//   throw  throws std::runtime_error, which the SDK's trampoline turns into
//          an error at the boundary, as it does for any plugin,
//   stall  blocks for stall_s seconds, then returns an error,
//   kill   sends itself SIGKILL (a rank process dying under mpirun),
//   stop   sends itself SIGSTOP (a frozen rank process: a debugger, a
//          suspended job), and goes on if it is ever continued,
//   nonfinite  (sum_squares) writes NaN into the first gradient element it reads
//          and into the sum, as a gradient gone non-finite would.
// Its cross-entropy statistics are ones, so that the loss of a run that
// computes nothing is 0, a finite number.
// Its model-family ops (Llama's, the KV cache's, flash attention) compute
// nothing either, like every other op.
#include <megahost/plugin.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

constexpr uint64_t kAlignment = 256;

class FaultyKernels {
 public:
  static constexpr MH_Kind kind = MH_KIND_KERNELS;
  static constexpr uint64_t capabilities = 0;
  static constexpr MH_OptionSpec options[] = {
      mh::opt_choice("fault", "\"error\"", "error|throw|stall|kill|stop|nonfinite", "what the faulting call does"),
      mh::opt("op", MH_VALUE_STRING, "\"any\"", "the call that faults: any, or a table entry (gemm, copy, ...)"),
      mh::opt_int("after", "0", 0, 1e12, "calls of `op` that succeed before the fault"),
      mh::opt_int("rank", "-1", -1, 1e6, "global rank that faults; -1: every rank"),
      mh::opt_double("stall_s", "5", 0, 3600, "fault = stall: how long the call blocks"),
  };

  explicit FaultyKernels(const mh::CreateContext& ctx)
      : fault_(ctx.options.get_string("fault")),
        op_(ctx.options.get_string("op")),
        after_(ctx.options.get_int("after")),
        stall_s_(ctx.options.get_double("stall_s")),
        rank_(ctx.rank),
        armed_(ctx.options.get_int("rank") < 0 || ctx.options.get_int("rank") == ctx.rank) {}

  void device_info(MH_DeviceInfo& out) {
    hit("device_info");
    out.device_type = MH_DEVICE_CPU;
    out.threads = 1;
    out.name = "faulty: computes nothing, fails on purpose";
    out.peak_flops = 1e9;
    out.compute_dtype = MH_F32;
  }
  void* alloc(uint64_t bytes) {
    hit("alloc");
    uint64_t size = (bytes / kAlignment + 1) * kAlignment;
    void* p = std::aligned_alloc(kAlignment, size);
    if (p == nullptr) throw mh::Error(MH_RESOURCE_EXHAUSTED, "faulty: out of host memory");
    return std::memset(p, 0, size);
  }
  void free(void* p) noexcept { std::free(p); }
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind) {
    hit("copy");
    std::memmove(dst, src, bytes);
  }
  void synchronize() { hit("synchronize"); }

#define FAULTY_OP(name, Args) \
  void name(const Args&) { hit(#name); }
  FAULTY_OP(gemm, MH_GemmArgs)
  FAULTY_OP(layernorm, MH_LayerNormArgs)
  FAULTY_OP(layernorm_bwd, MH_LayerNormBwdArgs)
  FAULTY_OP(elementwise, MH_ElementwiseArgs)
  FAULTY_OP(bias_add, MH_BiasArgs)
  FAULTY_OP(bias_bwd, MH_BiasArgs)
  FAULTY_OP(softmax, MH_SoftmaxArgs)
  FAULTY_OP(softmax_bwd, MH_SoftmaxArgs)
  FAULTY_OP(dropout, MH_DropoutArgs)
  FAULTY_OP(dropout_bwd, MH_DropoutArgs)
  FAULTY_OP(embedding, MH_EmbeddingArgs)
  FAULTY_OP(embedding_bwd, MH_EmbeddingArgs)
  FAULTY_OP(adamw, MH_AdamWArgs)
  FAULTY_OP(rmsnorm, MH_RmsNormArgs)
  FAULTY_OP(rmsnorm_bwd, MH_RmsNormBwdArgs)
  FAULTY_OP(rope, MH_RopeArgs)
  FAULTY_OP(swiglu, MH_SwigluArgs)
  FAULTY_OP(swiglu_bwd, MH_SwigluArgs)
  FAULTY_OP(strided_copy, MH_StridedCopyArgs)
  FAULTY_OP(attention, MH_AttentionArgs)
  FAULTY_OP(attention_bwd, MH_AttentionArgs)
#undef FAULTY_OP
  void xent(const MH_XentArgs& a) {
    hit("xent");
    if (a.step != MH_XENT_STATS) return;
    float* sum_exp = static_cast<float*>(a.sum_exp.data);
    std::fill(sum_exp, sum_exp + a.sum_exp.shape[0], 1.0f);
  }
  void sum_squares(const MH_SumSquaresArgs& a) {
    if (fault_ != "nonfinite") return hit("sum_squares");
    if (!armed_ || (op_ != "any" && op_ != "sum_squares") || ++calls_ <= after_) return;
    static_cast<float*>(a.x.data)[0] = std::nanf("");
    static_cast<float*>(a.out.data)[0] = std::nanf("");
  }

 private:
  void hit(const char* op) {
    if (!armed_ || (op_ != "any" && op_ != op) || ++calls_ <= after_) return;
    if (fault_ == "kill") std::raise(SIGKILL);
    if (fault_ == "stop") {
      std::raise(SIGSTOP);
      return;
    }
    std::string what = "faulty kernels: injected " + fault_ + " in " + op + " (call " + std::to_string(calls_) +
                       " on rank " + std::to_string(rank_) + ")";
    if (fault_ == "throw") throw std::runtime_error(what);
    if (fault_ == "stall") std::this_thread::sleep_for(std::chrono::duration<double>(stall_s_));
    throw mh::Error(MH_INTERNAL, what);
  }

  std::string fault_, op_;
  int64_t after_;
  double stall_s_;
  int32_t rank_;
  bool armed_;
  int64_t calls_ = 0;
};

}  // namespace

MH_PLUGIN("fault_kernels", "1.0.0",
          mh::component<FaultyKernels>("faulty", "1.0.0", "test fixture: computes nothing, injects one fault",
                                       FaultyKernels::options))
