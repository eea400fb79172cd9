#include "tuner/calibration_ops.hpp"

#include <algorithm>
#include <memory>

#include "engine/ops.hpp"

namespace mh {
namespace {

// Shapes of one call of `rows` rows: rows x C channels, G = rows / 64
// groups of S x S scores (below), rows x V logits, a table of R rows: 256 elements
// per row.
constexpr int64_t C = 256, S = 128, R = 1024, V = 256;

// The buffers of one prepared call, kept alive by the call.
struct Arena {
  std::vector<Buffer> f32;
  Buffer ids, mask;

  float* operator[](size_t i) const { return f32[i].f32(); }
};

std::shared_ptr<Arena> arena(Device& d, int64_t N, const std::vector<int64_t>& sizes) {
  auto a = std::make_shared<Arena>();
  for (int64_t n : sizes) {
    a->f32.emplace_back(d, MemCategory::kWorkspace, n);
    ops::fill(d, a->f32.back().f32(), n, 0.5f);
  }
  std::vector<int32_t> tokens(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) tokens[size_t(i)] = int32_t((i * 7919) % std::min(R, V));
  a->ids = Buffer(d, MemCategory::kWorkspace, N, MH_I32);
  d.to_device(a->ids.data(), tokens.data(), tokens.size() * sizeof(int32_t));
  const std::vector<uint8_t> keep(size_t(N * C), 1);
  a->mask = Buffer(d, MemCategory::kWorkspace, N * C, MH_U8);
  d.to_device(a->mask.data(), keep.data(), keep.size());
  return a;
}

int32_t* ids(const Arena& a) { return static_cast<int32_t*>(a.ids.data()); }
uint8_t* mask(const Arena& a) { return static_cast<uint8_t*>(a.mask.data()); }

// G groups of S x S scores; a call of fewer than 64 rows (a decode step's)
// is one group of its N * C / S rows of S scores.
MH_SoftmaxArgs softmax_args(const Arena& a, int64_t N) {
  const int64_t G = std::max<int64_t>(1, N / 64), rows = N * C / S / G;
  MH_SoftmaxArgs s{};
  s.x = view(a[0], MH_F32, {G, rows, S});
  s.out = view(a[1], MH_F32, {G, rows, S});
  s.dout = view(a[2], MH_F32, {G, rows, S});
  s.dx = view(a[0], MH_F32, {G, rows, S});
  s.scale = 0.125f;
  return s;
}

void xent_steps(Device& d, const Arena& a, int64_t N) {
  MH_XentArgs x{};
  x.logits = view(a[0], MH_F32, {N, V});
  x.targets = view(a.ids.data(), MH_I32, {N});
  x.row_max = view(a[1], MH_F32, {N});
  x.sum_exp = view(a[1] + N, MH_F32, {N});
  x.target_logit = view(a[1] + 2 * N, MH_F32, {N});
  x.scale = 1e-3f;
  for (int32_t step : {MH_XENT_MAX, MH_XENT_STATS, MH_XENT_BWD}) {
    x.step = step;
    d.run(&MH_KernelsApi::xent, x, "xent");
  }
}

MH_AdamWArgs adamw_args(const Arena& a, int64_t n) {
  MH_AdamWArgs w{};
  w.param = view(a[0], MH_F32, {n});
  w.grad = view(a[1], MH_F32, {n});
  w.m = view(a[2], MH_F32, {n});
  w.v = view(a[3], MH_F32, {n});
  w.lr = 1e-4f;
  w.beta1 = 0.9f;
  w.beta2 = 0.95f;
  w.eps = 1e-8f;
  w.step = 1;
  return w;
}

// An op of `rows` rows whose call, given its arena, is `body`; `sizes`
// are its f32 buffers.
template <class Body>
VectorOp op(const char* name, int64_t rows, int64_t elements, double bytes, std::vector<int64_t> sizes, Body body) {
  return VectorOp{name, elements, bytes, [rows, sizes, body](Device& d, int) -> std::function<void()> {
                    std::shared_ptr<Arena> a = arena(d, rows, sizes);
                    return [&d, a, body, rows] {
                      body(d, *a, rows);
                      d.synchronize();
                    };
                  }};
}

// Four chains of six calls per timed call.
constexpr int kChains = 4, kChainCalls = 6;
constexpr int64_t kChainInner = 64;

}  // namespace

VectorOp call_chain() {
  const int64_t k = kChainInner;
  return op("call", 1, kChains * kChainCalls, 1, {C, C, C, C, 2, k, k * k, k}, [k](Device& d, const Arena& a, int64_t) {
    for (int i = 0; i < kChains; ++i) {
      ops::layernorm(d, a[0], a[1], a[2], a[3], a[4], 1, C, 1e-5f);
      ops::gemm(d, a.f32[5].t({1, 1, k}), a.f32[6].t({1, k, k}), a.f32[7].t({1, 1, k}), false, true, 0);
      ops::bias_add(d, a[3], a[1], 1, C);
      ops::gelu(d, a[3], a[0], C);
      ops::copy(d, a[0], a[3], C);
      ops::fill(d, a[3], C, 0);
    }
  });
}

std::vector<VectorOp> vector_ops(int64_t N) {
  const int64_t E = N * C;
  const float p = 0.1f;
  const MH_RngSpan rng{7, 0, uint64_t(C), uint64_t(C)};
  using A = const Arena&;
  return {
      op("layernorm", N, E, 8, {E, C, C, E, 2 * N},
         [](Device& d, A a, int64_t n) { ops::layernorm(d, a[0], a[1], a[2], a[3], a[4], n, C, 1e-5f); }),
      op("layernorm_bwd", N, E, 16, {E, E, C, 2 * N, E, C, C},
         [](Device& d, A a, int64_t n) { ops::layernorm_bwd(d, a[0], a[1], a[2], a[3], a[4], a[5], a[6], n, C); }),
      op("bias_add", N, E, 8, {E, C}, [](Device& d, A a, int64_t n) { ops::bias_add(d, a[0], a[1], n, C); }),
      op("bias_bwd", N, E, 4, {E, C}, [](Device& d, A a, int64_t n) { ops::bias_bwd(d, a[0], a[1], n, C); }),
      op("gelu", N, E, 8, {E, E}, [](Device& d, A a, int64_t n) { ops::gelu(d, a[0], a[1], n * C); }),
      op("gelu_bwd", N, E, 12, {E, E, E}, [](Device& d, A a, int64_t n) { ops::gelu_bwd(d, a[0], a[1], a[2], n * C); }),
      op("softmax", N, E, 8, {E, E, E},
         [](Device& d, A a, int64_t n) { d.run(&MH_KernelsApi::softmax, softmax_args(a, n), "softmax"); }),
      op("softmax_bwd", N, E, 12, {E, E, E},
         [](Device& d, A a, int64_t n) { d.run(&MH_KernelsApi::softmax_bwd, softmax_args(a, n), "softmax_bwd"); }),
      op("dropout", N, E, 13, {E, E, E},
         [=](Device& d, A a, int64_t n) { ops::dropout(d, a[0], a[1], a[2], mask(a), n * C, p, rng); }),
      op("dropout_bwd", N, E, 9, {E, E},
         [=](Device& d, A a, int64_t n) { ops::dropout_bwd(d, a[0], mask(a), a[1], n * C, p); }),
      op("embedding", N, E, 8, {R * C, E},
         [](Device& d, A a, int64_t n) { ops::embedding(d, a[0], R, ids(a), a[1], n, C, 0, false); }),
      op("embedding_bwd", N, E, 12, {R * C, E},
         [](Device& d, A a, int64_t n) { ops::embedding_bwd(d, a[0], R, ids(a), a[1], n, C, 0); }),
      // One call stands for each of the three steps (max, statistics, backward).
      op("xent", N, 3 * N * V, 4, {N * V, 3 * N}, [](Device& d, A a, int64_t n) { xent_steps(d, a, n); }),
      op("adamw", N, E, 28, {E, E, E, E},
         [](Device& d, A a, int64_t n) { d.run(&MH_KernelsApi::adamw, adamw_args(a, n * C), "adamw"); }),
      op("sum_squares", N, E, 4, {E, 1}, [](Device& d, A a, int64_t n) {
        MH_SumSquaresArgs s{};
        s.x = view(a[0], MH_F32, {n * C});
        s.out = view(a[1], MH_F32, {1});
        d.run(&MH_KernelsApi::sum_squares, s, "sum_squares");
      }),
      op("elementwise", N, E, 4, {E}, [](Device& d, A a, int64_t n) { ops::fill(d, a[0], n * C, 0); }),
  };
}

}  // namespace mh
