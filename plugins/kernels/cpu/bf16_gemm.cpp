#include "bf16_gemm.hpp"
#include "ops/ops.hpp"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

namespace mh::kernels::cpu {
namespace {

using dnnl::memory;

memory::data_type type_of(const MH_Tensor& t) {
  return t.dtype == MH_BF16 ? memory::data_type::bf16 : memory::data_type::f32;
}

bool has(dnnl::cpu_isa isa, dnnl::cpu_isa feature) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(feature)) == static_cast<unsigned>(feature);
}

// op(t) of a [batch, rows, cols] product operand as oneDNN sees it: the
// logical (rows, cols) matrix over t's stored rows, its batch broadcast
// (dims 1) when t's batch stride is 0.
memory::desc operand(const MH_Tensor& t, bool trans, int64_t batch, int64_t rows, int64_t cols) {
  const int64_t ld = t.strides[1];
  const bool broadcast = t.strides[0] == 0;
  const int64_t batch_stride = broadcast ? rows * cols : t.strides[0];
  return memory::desc({broadcast ? 1 : batch, rows, cols}, type_of(t),
                      trans ? memory::dims{batch_stride, 1, ld} : memory::dims{batch_stride, ld, 1});
}

// The same operand packed: batches one after another, each `trans` or not.
memory::desc operand_packed(const MH_Tensor& t, bool trans, int64_t batch, int64_t rows, int64_t cols) {
  return memory::desc({batch, rows, cols}, type_of(t),
                      trans ? memory::dims{rows * cols, 1, rows} : memory::dims{rows * cols, cols, 1});
}

// Batches side by side in a row (attention's heads: a batch stride below the
// row stride) are a view oneDNN's brgemm kernels do not take; its generic
// kernel runs them at half the rate on AMX (docs/kernels-cpu.md). Such an
// operand is packed, batches one after another, into the instance's scratch
// (c: out of it, after the product): a copy linear in the sequence against a
// product quadratic in it. Up to kPackLimit bytes: the scratch is outside
// the engine's memory accounting, as oneDNN's own is.
constexpr size_t kPackLimit = size_t(16) << 20;

bool side_by_side(const MH_Tensor& t, int64_t batch) {
  return batch > 1 && t.strides[0] != 0 && t.strides[0] < t.strides[1];
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
  // A side-by-side operand's stored matrices and where their packed copy sits.
  struct Pack {
    int64_t batch, rows, cols, batch_stride, ld, element_bytes;
    size_t offset;
    memory::desc packed;
  };
  struct Primitive {
    dnnl::matmul matmul;
    memory::desc a, b, c;  // the views as the caller passes them
    std::optional<Pack> pack_a, pack_b, pack_c;
    size_t scratch_bytes;
  };
  const std::optional<Primitive>& get(const Key& key, const MH_GemmArgs& args, const GemmDims& d);
  // The matmul's operand: the caller's view, or its packed copy.
  memory in(const memory::desc& view, const std::optional<Pack>& pack, void* data, int threads);
  // Copies each stored row between the side-by-side view and the packed copy.
  static void copy_rows(const Pack& p, std::byte* view, std::byte* packed, bool unpack, int threads);
  std::byte* scratch_at(size_t offset) { return scratch.data() + (-reinterpret_cast<uintptr_t>(scratch.data()) & 63) + offset; }

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, std::optional<Primitive>> cache;
  std::vector<std::byte> scratch;  // the largest primitive's packed operands, and 64 bytes to align them
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
  Primitive p{{}, operand(args.a, args.trans_a != 0, d.batch, d.m, d.k),
              operand(args.b, args.trans_b != 0, d.batch, d.k, d.n), operand(args.c, false, d.batch, d.m, d.n),
              {}, {}, {}, 0};
  auto pack = [&](const MH_Tensor& t, bool trans, int64_t rows, int64_t cols) -> std::optional<Pack> {
    if (!side_by_side(t, d.batch)) return std::nullopt;
    const memory::desc packed = operand_packed(t, trans, d.batch, rows, cols);
    if (packed.get_size() > kPackLimit) return std::nullopt;
    const size_t offset = p.scratch_bytes;
    p.scratch_bytes += (packed.get_size() + 63) / 64 * 64;
    return Pack{d.batch, trans ? cols : rows, trans ? rows : cols, t.strides[0], t.strides[1],
                int64_t(memory::data_type_size(type_of(t))), offset, packed};
  };
  p.pack_a = pack(args.a, args.trans_a != 0, d.m, d.k);
  p.pack_b = pack(args.b, args.trans_b != 0, d.k, d.n);
  if (args.beta == 0.0f) p.pack_c = pack(args.c, false, d.m, d.n);  // with beta, c would be packed in and out
  dnnl::primitive_attr attr;
  if (args.alpha != 1.0f) attr.set_output_scales(0, {args.alpha});
  if (args.beta != 0.0f) {  // without the sum, oneDNN never reads c (BLAS's beta = 0)
    dnnl::post_ops sum;
    sum.append_sum(args.beta);
    attr.set_post_ops(sum);
  }
  auto read = [](const memory::desc& view, const std::optional<Pack>& s) { return s ? s->packed : view; };
  try {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(read(p.a, p.pack_a), read(p.b, p.pack_b), read(p.c, p.pack_c)), attr, engine);
    // oneDNN's reference kernels run any view, but orders of magnitude
    // slower than sgemm: the f32 path serves those views instead.
    if (std::strstr(pd.impl_info_str(), "ref") == nullptr) {
      p.matmul = dnnl::matmul(pd);
      it->second = std::move(p);
    }
  } catch (const dnnl::error&) {
    // No kernel for these views (status unimplemented): the f32 path runs them.
  }
  return it->second;
}

void Bf16Gemm::Primitives::copy_rows(const Pack& p, std::byte* view, std::byte* packed, bool unpack, int threads) {
  const size_t row = size_t(p.cols * p.element_bytes);
#pragma omp parallel for collapse(2) num_threads(team(threads, p.batch * p.rows * p.cols)) schedule(static)
  for (int64_t i = 0; i < p.batch; ++i)
    for (int64_t r = 0; r < p.rows; ++r) {
      std::byte* v = view + (i * p.batch_stride + r * p.ld) * p.element_bytes;
      std::byte* k = packed + size_t(i * p.rows + r) * row;
      std::memcpy(unpack ? v : k, unpack ? k : v, row);
    }
}

memory Bf16Gemm::Primitives::in(const memory::desc& view, const std::optional<Pack>& pack, void* data, int threads) {
  if (!pack) return memory(view, engine, data);
  std::byte* packed = scratch_at(pack->offset);
  copy_rows(*pack, static_cast<std::byte*>(data), packed, false, threads);
  return memory(pack->packed, engine, packed);
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
  Primitives& P = *primitives_;
  if (P.scratch.size() < p->scratch_bytes + 64) P.scratch.resize(p->scratch_bytes + 64);
  const memory a = P.in(p->a, p->pack_a, args.a.data, threads_), b = P.in(p->b, p->pack_b, args.b.data, threads_);
  const memory c = p->pack_c ? memory(p->pack_c->packed, P.engine, P.scratch_at(p->pack_c->offset))
                             : memory(p->c, P.engine, args.c.data);
  p->matmul.execute(P.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  P.stream.wait();
  if (p->pack_c) Primitives::copy_rows(*p->pack_c, static_cast<std::byte*>(args.c.data), P.scratch_at(p->pack_c->offset), true, threads_);
  return true;
}

}  // namespace mh::kernels::cpu
