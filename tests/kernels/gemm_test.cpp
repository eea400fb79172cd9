#include "test_util.hpp"

#include <limits>
#include <ostream>

namespace mh::kernels::test {
namespace {

struct GemmCase {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  int64_t pad;                    // every leading dimension exceeds its columns by this
  bool broadcast_a, broadcast_b;  // batch stride 0
  float alpha, beta;
};

std::ostream& operator<<(std::ostream& os, const GemmCase& g) {
  return os << g.batch << " x [" << g.m << " x " << g.k << "] @ [" << g.k << " x " << g.n << "]"
            << (g.trans_a ? " ta" : "") << (g.trans_b ? " tb" : "") << " pad " << g.pad
            << (g.broadcast_a ? " broadcast a" : "") << (g.broadcast_b ? " broadcast b" : "") << " alpha " << g.alpha
            << " beta " << g.beta;
}

// A batch of stored row-major matrices [batch, rows, cols] with leading
// dimension cols + pad; with `broadcast`, one matrix at batch stride 0.
struct Stored {
  int64_t batch, rows, cols, ld, batch_stride;
  std::vector<float> data;

  Stored(int64_t batch, int64_t rows, int64_t cols, int64_t pad, bool broadcast, uint32_t seed)
      : batch(batch), rows(rows), cols(cols), ld(cols + pad), batch_stride(broadcast ? 0 : rows * ld),
        data(random_floats((broadcast ? 1 : batch) * rows * ld, seed)) {}

  float at(int64_t b, int64_t r, int64_t c) const { return data[b * batch_stride + r * ld + c]; }
  size_t index(int64_t b, int64_t r, int64_t c) const { return b * batch_stride + r * ld + c; }
  MH_Tensor tensor() { return with_strides(view(data.data(), MH_F32, {batch, rows, cols}), {batch_stride, ld, 1}); }
};

// c in double, padding included (it must come back untouched).
std::vector<double> reference(const GemmCase& g, const Stored& a, const Stored& b, const Stored& c) {
  std::vector<double> out = to_double(c.data);
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p)
          sum += static_cast<double>(g.trans_a ? a.at(i, p, r) : a.at(i, r, p)) *
                 (g.trans_b ? b.at(i, j, p) : b.at(i, p, j));
        // beta = 0 means c is not read (BLAS): garbage there must not leak out.
        out[c.index(i, r, j)] = g.alpha * sum + (g.beta == 0 ? 0.0 : g.beta * c.at(i, r, j));
      }
  return out;
}

MH_GemmArgs gemm_args(Stored& a, Stored& b, Stored& c, const GemmCase& g) {
  MH_GemmArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_GemmArgs, beta);
  args.a = a.tensor();
  args.b = b.tensor();
  args.c = c.tensor();
  args.trans_a = g.trans_a;
  args.trans_b = g.trans_b;
  args.alpha = g.alpha;
  args.beta = g.beta;
  return args;
}

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesReferenceOnOneAndTwoThreads) {
  const GemmCase g = GetParam();
  Stored a(g.batch, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.pad, g.broadcast_a, 1);
  Stored b(g.batch, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.pad, g.broadcast_b, 2);
  const Stored c0(g.batch, g.m, g.n, g.pad, false, 3);
  const std::vector<double> expected = reference(g, a, b, c0);
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Stored c = c0;
    Cpu(threads).run(&MH_KernelsApi::gemm, gemm_args(a, b, c, g));
    EXPECT_TRUE(all_close(c.data, expected, 1e-5, 1e-5));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    ::testing::Values(GemmCase{1, 5, 7, 3, false, false, 0, false, false, 1.0f, 0.0f},
                      GemmCase{1, 13, 17, 19, true, false, 3, false, false, 0.5f, 1.0f},
                      GemmCase{1, 9, 33, 65, false, true, 1, false, false, 1.0f, -0.5f},
                      GemmCase{1, 31, 11, 23, true, true, 5, false, false, -2.0f, 0.25f},
                      GemmCase{3, 6, 10, 7, false, true, 2, true, false, 1.0f, 1.0f},
                      GemmCase{4, 12, 5, 9, true, false, 0, false, true, 1.0f, 0.0f},
                      GemmCase{1, 4, 5, 0, false, false, 1, false, false, 1.0f, 0.5f},
                      // Large enough for two threads to split one product by rows, then by columns.
                      GemmCase{1, 150, 140, 100, false, false, 0, false, false, 1.0f, 0.0f},
                      GemmCase{1, 161, 143, 97, true, false, 3, false, false, 1.0f, 1.0f},
                      GemmCase{1, 30, 400, 170, false, false, 2, false, false, 1.0f, 0.0f},
                      GemmCase{1, 37, 301, 203, true, true, 1, false, false, 1.0f, 1.0f},
                      // Many products: one per thread.
                      GemmCase{6, 65, 63, 129, false, true, 0, false, false, 1.0f, 0.0f},
                      // Few rows against a transposed b (decode steps): b streamed once, also split by
                      // columns between two threads, and a broadcast weight.
                      GemmCase{1, 1, 300, 97, false, true, 1, false, false, 1.0f, 0.0f},
                      GemmCase{3, 4, 50, 33, false, true, 2, false, true, 0.5f, 0.5f},
                      GemmCase{1, 8, 3001, 200, false, true, 3, false, false, 1.0f, 1.0f},
                      GemmCase{1, 9, 20, 17, false, true, 0, false, false, 1.0f, 0.0f}));

class GemmBetaZero : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmBetaZero, IgnoresWhatCHeld) {
  const GemmCase g = GetParam();
  Stored a(g.batch, g.m, g.k, g.pad, false, 4), b(g.batch, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.pad, false, 5),
      c(g.batch, g.m, g.n, g.pad, false, 6);
  std::fill(c.data.begin(), c.data.end(), std::numeric_limits<float>::quiet_NaN());
  const std::vector<double> expected = reference(g, a, b, c);
  Cpu().run(&MH_KernelsApi::gemm, gemm_args(a, b, c, g));
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t j = 0; j < g.n; ++j)
        EXPECT_NEAR(c.at(i, r, j), expected[c.index(i, r, j)], 1e-5) << i << ", " << r << ", " << j;
}

INSTANTIATE_TEST_SUITE_P(SgemmAndFewRows, GemmBetaZero,
                         ::testing::Values(GemmCase{2, 7, 9, 5, false, false, 1, false, false, 1.5f, 0.0f},
                                           GemmCase{2, 2, 9, 5, false, true, 1, false, false, 1.5f, 0.0f}));

// Attention heads write side by side into one [S, A * D] context: the c
// matrices interleave within rows (batch stride D, leading dimension A * D).
TEST(Gemm, WritesHeadsSideBySideInOneMatrix) {
  constexpr int64_t heads = 3, S = 4, D = 5, K = 6;
  Stored a(heads, S, K, 0, false, 7), b(heads, K, D, 0, false, 8);
  std::vector<float> context(S * heads * D, -7.0f);
  MH_GemmArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_GemmArgs, beta);
  args.a = a.tensor();
  args.b = b.tensor();
  args.c = with_strides(view(context, {heads, S, D}), {D, heads * D, 1});
  args.alpha = 1.0f;
  Cpu().run(&MH_KernelsApi::gemm, args);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d) {
        double sum = 0;
        for (int64_t p = 0; p < K; ++p) sum += static_cast<double>(a.at(h, s, p)) * b.at(h, p, d);
        EXPECT_NEAR(context[s * heads * D + h * D + d], sum, 1e-5) << h << ", " << s << ", " << d;
      }
}

}  // namespace
}  // namespace mh::kernels::test
