// The cpu component with dtype = "bf16" against the same component in fp32:
// every op the engine runs in mixed precision, on the same values (inputs
// are bf16-representable, so the fp32 run sees exactly what the bf16 run
// reads). The bounds hold for any correct implementation that accumulates
// in f32, whatever its summation order or blocking (oneDNN, AMX, OpenBLAS):
//  - an f32 output is a sum of at most 300 terms here; two sums of n terms
//    in different orders differ by at most 2 n 2^-24 of the sum of the
//    terms' magnitudes, which here stays within a few times the largest
//    output (kF32Tolerance, relative to it); GEMMs are checked element by
//    element against that magnitude itself (gemm_bound);
//  - a bf16 output is the f32 value rounded once to 8 significant bits,
//    2^-8 of itself at most; kBf16Tolerance allows two such roundings and
//    the f32 error, relative to the largest output.
#include "bf16.hpp"
#include "bf16_rows.hpp"
#include "test_util.hpp"

#include <algorithm>
#include <bit>
#include <random>
#include <limits>

namespace mh::kernels::test {
namespace {

using cpu::from_bf16;
using cpu::to_bf16;

constexpr double kF32Unit = 0x1p-24, kBf16Unit = 0x1p-8;
constexpr double kF32Tolerance = 2 * 300 * kF32Unit * 4, kBf16Tolerance = 2 * kBf16Unit + kF32Tolerance;

Instance<CpuKernels> cpu_kernels(const char* dtype) {
  return Instance<CpuKernels>(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", dtype}});
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = from_bf16(to_bf16(x));
  return v;
}

// Max abs difference over max abs value.
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double diff = 0, scale = std::numeric_limits<double>::min();
  for (size_t i = 0; i < expected.size(); ++i) {
    diff = std::max(diff, std::abs(double(actual[i]) - expected[i]));
    scale = std::max(scale, std::abs(double(expected[i])));
  }
  return diff / scale;
}

// sum_j |a_ij b_nj| + |beta c0| for c = a b^T + beta c0 (a m x k, b n x k).
std::vector<double> gemm_magnitude(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                                   int64_t k, double beta_c0) {
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = std::abs(beta_c0);
      for (int64_t l = 0; l < k; ++l) s += std::abs(double(a[i * k + l]) * b[j * k + l]);
      out[size_t(i * n + j)] = s;
    }
  return out;
}

// bf16 x bf16 products are exact in f32 (8 + 8 significant bits), so each
// of the two results is within (k + 1) 2^-24 of the magnitude of the exact
// sum; a bf16 result is then rounded once more, by 2^-8 of itself.
::testing::AssertionResult within_gemm_bound(const std::vector<float>& actual, const std::vector<float>& f32,
                                             const std::vector<double>& magnitude, int64_t k, bool bf16_out) {
  for (size_t i = 0; i < f32.size(); ++i) {
    const double accumulation = 2 * double(k + 1) * kF32Unit * magnitude[i];
    const double bound = accumulation + (bf16_out ? kBf16Unit * (std::abs(double(f32[i])) + accumulation) : 0);
    if (std::abs(double(actual[i]) - f32[i]) > bound)
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs f32 " << f32[i]
                                           << ", bound " << bound;
  }
  return ::testing::AssertionSuccess();
}

// One activation tensor held twice with the same values: f32 for the fp32
// component, bf16 for the bf16 one.
struct Twin {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;

  explicit Twin(const std::vector<float>& values) : f32(rounded(values)) {
    for (float x : values) bf16.push_back(to_bf16(x));
  }
  MH_Tensor view(bool in_bf16, std::vector<int64_t> shape) {
    return in_bf16 ? test::view(bf16.data(), MH_BF16, std::move(shape)) : test::view(f32, std::move(shape));
  }
  static Twin zeros(int64_t n) { return Twin(std::vector<float>(size_t(n))); }
  std::vector<float> bf16_values() const {
    std::vector<float> v;
    for (uint16_t b : bf16) v.push_back(from_bf16(b));
    return v;
  }
};

// Runs `op` on both components, the activations' views built by `args(bf16)`.
template <class Args, class Build>
void run_both(Op<Args> op, Build args) {
  cpu_kernels("\"fp32\"").run(op, args(false));
  cpu_kernels("\"bf16\"").run(op, args(true));
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNanAndInfinity) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80);           // halfway, to even (down)
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);       // halfway, to even (up)
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // past halfway
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::bit_cast<float>(0x7fffffffu)))));  // no carry into inf
}

// The vector conversions of the ops (AVX-512, or the portable loop under
// ONEDNN_MAX_CPU_ISA=AVX2) against the scalar ones: every bf16 value widened,
// and f32 bit patterns of every kind (NaNs, infinities, subnormals, ties)
// narrowed, from an odd start and length so the vector tails run too.
TEST(Bf16, RowConversionsAreBitForBitTheScalarOnes) {
  std::vector<uint16_t> all(65536 + 1);
  for (uint32_t i = 0; i < 65536; ++i) all[i + 1] = uint16_t(i);
  std::vector<float> wide(all.size());
  cpu::widen_row(wide.data() + 1, all.data() + 1, 65536);
  for (uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(wide[i + 1]), i << 16) << i;

  std::mt19937 gen(7);
  std::vector<float> values(100003);
  for (float& v : values) v = std::bit_cast<float>(uint32_t(gen()));
  const uint32_t edges[] = {0x7f800000u, 0xff800000u, 0x7fffffffu, 0x7f800001u, 0xffc00000u, 0x00000001u,
                            0x80008000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x3f807fffu};
  for (size_t i = 0; i < std::size(edges); ++i) values[i + 1] = std::bit_cast<float>(edges[i]);
  std::vector<uint16_t> narrow(values.size());
  cpu::narrow_row(narrow.data() + 1, values.data() + 1, int64_t(values.size()) - 1);
  for (size_t i = 1; i < values.size(); ++i)
    ASSERT_EQ(narrow[i], to_bf16(values[i])) << std::hex << std::bit_cast<uint32_t>(values[i]);
}

TEST(Bf16, DeviceInfoReportsTheComputeDtype) {
  EXPECT_EQ(cpu_kernels("\"bf16\"").device_info().compute_dtype, MH_BF16);
  EXPECT_EQ(cpu_kernels("\"fp32\"").device_info().compute_dtype, MH_F32);
}

TEST(Bf16, CopyConvertsBetweenDtypes) {
  const auto k = cpu_kernels("\"bf16\"");
  std::vector<float> master = random_floats(100, 1), back(100);
  std::vector<uint16_t> copy(100);
  MH_ElementwiseArgs e{MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha), MH_COPY, view(master, {100}), {},
                       view(copy.data(), MH_BF16, {100}), 0};
  k.run(&MH_KernelsApi::elementwise, e);
  for (size_t i = 0; i < copy.size(); ++i) EXPECT_EQ(copy[i], to_bf16(master[i])) << i;
  e.x = e.out;
  e.out = view(back, {100});
  k.run(&MH_KernelsApi::elementwise, e);
  EXPECT_EQ(back, rounded(master));
}

// Also with few rows of a (a decode step), where b is read in bf16 as
// stored, on one thread and split between two.
TEST(Bf16, GemmIntoF32MatchesF32AndIntoBf16RoundsOnce) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape shape : {Shape{33, 17, 64}, Shape{1, 17, 64}, Shape{8, 29, 40}, Shape{4, 3000, 300}}) {
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    SCOPED_TRACE("m " + std::to_string(m) + ", n " + std::to_string(n));
    Twin a(random_floats(m * k, 2)), b(random_floats(n * k, 3));
    for (const bool bf16_c : {false, true}) {
      Twin c(std::vector<float>(m * n, 0.5f));
      std::vector<float> c_f32 = c.f32;
      run_both(&MH_KernelsApi::gemm, [&](bool bf) {
        MH_Tensor ct = bf && bf16_c ? c.view(true, {1, m, n}) : view(bf ? c_f32 : c.f32, {1, m, n});
        return MH_GemmArgs{MH_STRUCT_SIZE(MH_GemmArgs, beta), a.view(bf, {1, m, k}), b.view(bf, {1, n, k}), ct, 0, 1,
                           1.0f, 1.0f};
      });
      const std::vector<double> magnitude = gemm_magnitude(a.f32, b.f32, m, n, k, 0.5);
      if (bf16_c) EXPECT_TRUE(within_gemm_bound(c.bf16_values(), c.f32, magnitude, k, true));
      else EXPECT_TRUE(within_gemm_bound(c_f32, c.f32, magnitude, k, false));
    }
  }
}

// The engine's attention views: heads interleaved in one row, so every
// operand is strided and c leaves gaps that belong to other heads.
TEST(Bf16, GemmOnInterleavedHeadsLeavesTheGapsAlone) {
  const int64_t heads = 3, seq = 8, d = 4, row = heads * 3 * d;
  Twin qkv(random_floats(seq * row, 4)), out(random_floats(seq * row, 5));
  const std::vector<uint16_t> before = out.bf16;
  auto strided = [&](Twin& t, bool bf, int which) {
    MH_Tensor v = with_strides(t.view(bf, {heads, seq, d}), {3 * d, row, 1});
    v.data = static_cast<char*>(v.data) + which * d * (bf ? 2 : 4);
    return v;
  };
  // Per head, out's third slot (seq x d) = its Q (seq x d) @ the first d rows of its K (d x d).
  run_both(&MH_KernelsApi::gemm, [&](bool bf) {
    MH_Tensor k_rows = strided(qkv, bf, 1);
    k_rows.shape[1] = d;
    return MH_GemmArgs{MH_STRUCT_SIZE(MH_GemmArgs, beta), strided(qkv, bf, 0), k_rows, strided(out, bf, 2), 0, 0,
                       1.0f, 0.0f};
  });
  EXPECT_LT(relative_error(out.bf16_values(), out.f32), kBf16Tolerance);
  for (int64_t r = 0; r < seq; ++r)
    for (int64_t c = 0; c < row; ++c)
      if ((c % (3 * d)) / d != 2) {
        ASSERT_EQ(out.bf16[r * row + c], before[r * row + c]) << r << ", " << c;
      }
}

TEST(Bf16, LayerNormKeepsF32StatisticsAndParameters) {
  const int64_t rows = 6, cols = 96;
  Twin x(random_floats(rows * cols, 6, -2, 3)), out(Twin::zeros(rows * cols));
  std::vector<float> w = random_floats(cols, 7), b = random_floats(cols, 8);
  std::vector<float> stats[2] = {std::vector<float>(2 * rows), std::vector<float>(2 * rows)};
  run_both(&MH_KernelsApi::layernorm, [&](bool bf) {
    return MH_LayerNormArgs{MH_STRUCT_SIZE(MH_LayerNormArgs, eps), x.view(bf, {rows, cols}), view(w, {cols}),
                            view(b, {cols}), out.view(bf, {rows, cols}),
                            view(stats[bf].data(), MH_F32, {rows}), view(stats[bf].data() + rows, MH_F32, {rows}),
                            1e-5f};
  });
  EXPECT_LT(relative_error(out.bf16_values(), out.f32), kBf16Tolerance);
  EXPECT_LT(relative_error(stats[1], stats[0]), kF32Tolerance);
}

TEST(Bf16, LayerNormBackwardAccumulatesF32Gradients) {
  const int64_t rows = 6, cols = 96;
  Twin x(random_floats(rows * cols, 9)), dout(random_floats(rows * cols, 10));
  std::vector<float> w = random_floats(cols, 11), mean(rows), rstd(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, s2 = 0;
    for (int64_t c = 0; c < cols; ++c) s += x.f32[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) s2 += std::pow(x.f32[r * cols + c] - s / cols, 2);
    mean[r] = float(s / cols);
    rstd[r] = float(1 / std::sqrt(s2 / cols + 1e-5));
  }
  std::vector<float> dx[2], dw[2], db[2];
  for (int i = 0; i < 2; ++i) {
    dx[i] = std::vector<float>(rows * cols, 0.25f);
    dw[i] = db[i] = std::vector<float>(cols, 0.25f);
  }
  run_both(&MH_KernelsApi::layernorm_bwd, [&](bool bf) {
    return MH_LayerNormBwdArgs{MH_STRUCT_SIZE(MH_LayerNormBwdArgs, dbias), dout.view(bf, {rows, cols}),
                               x.view(bf, {rows, cols}), view(w, {cols}), view(mean, {rows}), view(rstd, {rows}),
                               view(dx[bf].data(), MH_F32, {rows, cols}), view(dw[bf].data(), MH_F32, {cols}),
                               view(db[bf].data(), MH_F32, {cols})};
  });
  EXPECT_LT(relative_error(dx[1], dx[0]), kF32Tolerance);
  EXPECT_LT(relative_error(dw[1], dw[0]), kF32Tolerance);
  EXPECT_LT(relative_error(db[1], db[0]), kF32Tolerance);
}

TEST(Bf16, SoftmaxForwardAndBackwardInPlace) {
  const int64_t groups = 4, seq = 16, n = groups * seq * seq;
  Twin scores(random_floats(n, 12, -4, 4)), dp(random_floats(n, 13));
  run_both(&MH_KernelsApi::softmax, [&](bool bf) {
    MH_SoftmaxArgs s{};
    s.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
    s.x = s.out = scores.view(bf, {groups, seq, seq});
    s.scale = 0.5f;
    return s;
  });
  EXPECT_LT(relative_error(scores.bf16_values(), scores.f32), kBf16Tolerance);
  scores.f32 = scores.bf16_values();  // backward reads the probabilities both kept
  run_both(&MH_KernelsApi::softmax_bwd, [&](bool bf) {
    MH_SoftmaxArgs s{};
    s.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
    s.out = scores.view(bf, {groups, seq, seq});
    s.dout = s.dx = dp.view(bf, {groups, seq, seq});
    s.scale = 0.5f;
    return s;
  });
  EXPECT_LT(relative_error(dp.bf16_values(), dp.f32), kBf16Tolerance);
}

TEST(Bf16, GeluAndItsGradient) {
  const int64_t n = 1000;
  Twin x(random_floats(n, 14, -3, 3)), y(Twin::zeros(n)), dy(random_floats(n, 15));
  run_both(&MH_KernelsApi::elementwise, [&](bool bf) {
    return MH_ElementwiseArgs{MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha), MH_GELU, x.view(bf, {n}), {},
                              y.view(bf, {n}), 0};
  });
  EXPECT_LT(relative_error(y.bf16_values(), y.f32), kBf16Tolerance);
  run_both(&MH_KernelsApi::elementwise, [&](bool bf) {
    return MH_ElementwiseArgs{MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha), MH_GELU_BWD, x.view(bf, {n}),
                              dy.view(bf, {n}), dy.view(bf, {n}), 0};
  });
  EXPECT_LT(relative_error(dy.bf16_values(), dy.f32), kBf16Tolerance);
}

// The engine's residual branch: f32 partial sums, bf16 residual and output.
TEST(Bf16, DropoutWithResidualMixesDtypesAndDrawsTheSameMask) {
  const int64_t n = 4096;
  std::vector<float> partial = rounded(random_floats(n, 16));
  Twin residual(random_floats(n, 17)), out(Twin::zeros(n));
  std::vector<uint8_t> mask[2] = {std::vector<uint8_t>(n), std::vector<uint8_t>(n)};
  run_both(&MH_KernelsApi::dropout, [&](bool bf) {
    return MH_DropoutArgs{MH_STRUCT_SIZE(MH_DropoutArgs, rng), view(partial, {n}), residual.view(bf, {n}),
                          out.view(bf, {n}), view(mask[bf], {n}), 0.25f, MH_RngSpan{7, 0, uint64_t(n), uint64_t(n)}};
  });
  EXPECT_EQ(mask[1], mask[0]);
  EXPECT_LT(relative_error(out.bf16_values(), out.f32), kBf16Tolerance);
}

TEST(Bf16, EmbeddingReadsF32TablesAndAccumulatesF32Gradients) {
  const int64_t rows = 10, cols = 64, tokens = 12;
  std::vector<float> table = random_floats(rows * cols, 18);
  std::vector<int32_t> ids = {0, 3, 3, 9, 1, 2, 5, 5, 5, 7, 8, 0};
  Twin out(Twin::zeros(tokens * cols)), dout(random_floats(tokens * cols, 19));
  run_both(&MH_KernelsApi::embedding, [&](bool bf) {
    return MH_EmbeddingArgs{MH_STRUCT_SIZE(MH_EmbeddingArgs, accumulate), view(table, {rows, cols}),
                            view(ids, {tokens}), out.view(bf, {tokens, cols}), 0, 0};
  });
  EXPECT_LT(relative_error(out.bf16_values(), out.f32), kBf16Tolerance);
  std::vector<float> dtable[2] = {std::vector<float>(rows * cols), std::vector<float>(rows * cols)};
  run_both(&MH_KernelsApi::embedding_bwd, [&](bool bf) {
    return MH_EmbeddingArgs{MH_STRUCT_SIZE(MH_EmbeddingArgs, accumulate), view(dtable[bf], {rows, cols}),
                            view(ids, {tokens}), dout.view(bf, {tokens, cols}), 0, 0};
  });
  EXPECT_LT(relative_error(dtable[1], dtable[0]), kF32Tolerance);
}

TEST(Bf16, BiasAddAndItsF32Gradient) {
  const int64_t rows = 16, cols = 80;
  Twin x(random_floats(rows * cols, 20));
  std::vector<float> bias = random_floats(cols, 21);
  run_both(&MH_KernelsApi::bias_add, [&](bool bf) {
    return MH_BiasArgs{MH_STRUCT_SIZE(MH_BiasArgs, out), x.view(bf, {rows, cols}), view(bias, {cols}),
                       x.view(bf, {rows, cols})};
  });
  EXPECT_LT(relative_error(x.bf16_values(), x.f32), kBf16Tolerance);
  x.f32 = x.bf16_values();
  std::vector<float> dbias[2] = {std::vector<float>(cols), std::vector<float>(cols)};
  run_both(&MH_KernelsApi::bias_bwd, [&](bool bf) {
    return MH_BiasArgs{MH_STRUCT_SIZE(MH_BiasArgs, out), x.view(bf, {rows, cols}), view(dbias[bf], {cols}),
                       x.view(bf, {rows, cols})};
  });
  EXPECT_LT(relative_error(dbias[1], dbias[0]), kF32Tolerance);
}

// The engine keeps logits in f32, but the kernels take bf16 ones too.
TEST(Bf16, CrossEntropyOnBf16LogitsKeepsF32Statistics) {
  const int64_t rows = 8, vocab = 300;
  Twin logits(random_floats(rows * vocab, 22, -5, 5));
  std::vector<int32_t> targets = {0, 5, 299, 17, 17, 100, 250, 3};
  std::vector<float> stats[2] = {std::vector<float>(3 * rows), std::vector<float>(3 * rows)};
  for (int32_t step = MH_XENT_MAX; step <= MH_XENT_BWD; ++step)
    run_both(&MH_KernelsApi::xent, [&](bool bf) {
      float* v = stats[bf].data();
      return MH_XentArgs{MH_STRUCT_SIZE(MH_XentArgs, id_limit), step, logits.view(bf, {rows, vocab}),
                         view(targets, {rows}), view(v, MH_F32, {rows}), view(v + rows, MH_F32, {rows}),
                         view(v + 2 * rows, MH_F32, {rows}), 0, 1.0f, 0};
    });
  EXPECT_LT(relative_error(stats[1], stats[0]), kF32Tolerance);
  EXPECT_LT(relative_error(logits.bf16_values(), logits.f32), kBf16Tolerance);
}

}  // namespace
}  // namespace mh::kernels::test
