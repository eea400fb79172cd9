#include "bf16_gemm.hpp"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <optional>

namespace mh::kernels::cpu {
namespace {

using dnnl::memory;

bool has(dnnl::cpu_isa isa, dnnl::cpu_isa feature) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(feature)) == static_cast<unsigned>(feature);
}

// op(t) of a [batch, rows, cols] product operand as oneDNN sees it: the
// logical (rows, cols) matrix over t's stored rows, its batch broadcast
// (dims 1) when t's batch stride is 0.
memory::desc operand(const MH_Tensor& t, bool trans, int64_t batch, int64_t rows, int64_t cols) {
  const memory::data_type type = t.dtype == MH_BF16 ? memory::data_type::bf16 : memory::data_type::f32;
  const int64_t ld = t.strides[1];
  const bool broadcast = t.strides[0] == 0;
  const int64_t batch_stride = broadcast ? rows * cols : t.strides[0];
  return memory::desc({broadcast ? 1 : batch, rows, cols}, type,
                      trans ? memory::dims{batch_stride, 1, ld} : memory::dims{batch_stride, ld, 1});
}

// Scoped OpenMP team size of the calling thread: oneDNN sizes its team from
// omp_get_max_threads(), and each rank's thread has its own.
class TeamSize {
 public:
  explicit TeamSize(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~TeamSize() { omp_set_num_threads(saved_); }
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int saved_;
};

}  // namespace

// One primitive per shape, built on first use (nullopt: oneDNN has none).
// The engine calls the same few shapes every step.
struct Bf16Gemm::Primitives {
  // Everything a primitive depends on: the views' dims and strides, c's
  // dtype, alpha and beta (bits).
  using Key = std::array<int64_t, 15>;
  struct Primitive {
    dnnl::matmul matmul;
    dnnl::memory::desc a, b, c;
  };
  const std::optional<Primitive>& get(const Key& key, const MH_GemmArgs& args, const GemmDims& d);

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, std::optional<Primitive>> cache;
};

bool avx512_allowed() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && (isa & core) == core;
}

Bf16Units detect_bf16_units() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (has(isa, dnnl::cpu_isa::avx512_core_amx)) return Bf16Units::kAmx;
  if (has(isa, dnnl::cpu_isa::avx512_core_bf16)) return Bf16Units::kAvx512Bf16;
  return Bf16Units::kNone;
}

Bf16Gemm::Bf16Gemm(int threads) : threads_(threads), primitives_(std::make_unique<Primitives>()) {}

Bf16Gemm::~Bf16Gemm() = default;

const std::optional<Bf16Gemm::Primitives::Primitive>& Bf16Gemm::Primitives::get(const Key& key,
                                                                                  const MH_GemmArgs& args,
                                                                                  const GemmDims& d) {
  auto [it, added] = cache.try_emplace(key);
  if (!added) return it->second;
  const memory::desc a = operand(args.a, args.trans_a != 0, d.batch, d.m, d.k);
  const memory::desc b = operand(args.b, args.trans_b != 0, d.batch, d.k, d.n);
  const memory::desc c = operand(args.c, false, d.batch, d.m, d.n);
  dnnl::primitive_attr attr;
  if (args.alpha != 1.0f) attr.set_output_scales(0, {args.alpha});
  if (args.beta != 0.0f) {  // without the sum, oneDNN never reads c (BLAS's beta = 0)
    dnnl::post_ops sum;
    sum.append_sum(args.beta);
    attr.set_post_ops(sum);
  }
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
    // oneDNN's reference kernels run any view, but orders of magnitude
    // slower than sgemm: the f32 path serves those views instead.
    if (std::strstr(pd.impl_info_str(), "ref") == nullptr) it->second = Primitive{dnnl::matmul(pd), a, b, c};
  } catch (const dnnl::error&) {
    // No kernel for these views (status unimplemented): the f32 path runs them.
  }
  return it->second;
}

bool Bf16Gemm::run(const MH_GemmArgs& args, const GemmDims& d) {
  // alpha 0 is BLAS's c = beta c, whatever a and b hold; oneDNN scales the
  // product instead, so a non-finite product became NaN (a LoRA adapter at
  // alpha 0 in bf16). The f32 path computes it as BLAS does.
  if (args.a.dtype != MH_BF16 || args.b.dtype != MH_BF16 || args.alpha == 0.0f) return false;
  const Primitives::Key key{d.batch,          d.m,           d.n,           d.k,
                args.a.strides[0], args.a.strides[1], args.trans_a, args.b.strides[0],
                args.b.strides[1], args.trans_b,  args.c.strides[0], args.c.strides[1],
                args.c.dtype,     std::bit_cast<int32_t>(args.alpha), std::bit_cast<int32_t>(args.beta)};
  const TeamSize team(threads_);
  const std::optional<Primitives::Primitive>& p = primitives_->get(key, args, d);
  if (!p) return false;
  const dnnl::engine& engine = primitives_->engine;
  memory a(p->a, engine, args.a.data), b(p->b, engine, args.b.data), c(p->c, engine, args.c.data);
  p->matmul.execute(primitives_->stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  primitives_->stream.wait();
  return true;
}

}  // namespace mh::kernels::cpu
