#include "test_util.hpp"

#include <megahost/rng.hpp>

#include "ops/ops.hpp"

namespace mh::kernels::test {
namespace {

struct DropoutData {
  int64_t n;
  std::vector<float> x, residual, out;
  std::vector<uint8_t> mask;

  explicit DropoutData(int64_t n)
      : n(n), x(random_floats(n, 1)), residual(random_floats(n, 2)), out(n), mask(n, 7) {}

  MH_DropoutArgs args(float p, MH_RngSpan rng, bool with_residual = true) {
    MH_DropoutArgs a{};
    a.struct_size = MH_STRUCT_SIZE(MH_DropoutArgs, rng);
    a.x = view(x, {n});
    a.residual = with_residual ? view(residual, {n}) : view(nullptr, MH_F32, {n});
    a.out = view(out, {n});
    a.mask = view(mask, {n});
    a.p = p;
    a.rng = rng;
    return a;
  }
};

TEST(Dropout, EachElementDrawsItsOwnCounter) {
  constexpr int64_t rows = 6, len = 10;
  constexpr float p = 0.4f;
  const MH_RngSpan rng{77, 1000, len, 25};
  DropoutData d(rows * len);
  Cpu().run(&MH_KernelsApi::dropout, d.args(p, rng));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = r * len + j;
      const bool keep = mh::rng::uniform(77, 1000 + r * 25 + j) >= p;
      ASSERT_EQ(d.mask[i], keep ? 1 : 0) << r << ", " << j;
      EXPECT_NEAR(d.out[i], (keep ? d.x[i] / (1 - p) : 0.0f) + d.residual[i], 1e-6) << r << ", " << j;
    }
}

// Sixteen counters at a time in AVX-512 lanes where the CPU has it (ctest
// reruns this capped to AVX2, the scalar loop): every tail length, and
// counters whose low word wraps into the high one mid-vector.
TEST(Dropout, TheDrawsAreRngsUniformWhateverTheLanes) {
  for (const uint64_t first : {uint64_t{0}, uint64_t{1000}, uint64_t{0xFFFFFFF7u}, uint64_t{0x12345678FFFFFFF0u}})
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> u(size_t(n) + 1, -1.0f);
      cpu::uniforms(0xC0FFEE0123456789u, first, n, u.data());
      for (int64_t k = 0; k < n; ++k)
        ASSERT_EQ(u[size_t(k)], mh::rng::uniform(0xC0FFEE0123456789u, first + uint64_t(k))) << first << " + " << k;
      ASSERT_EQ(u[size_t(n)], -1.0f) << "wrote past " << n;
    }
}

TEST(Dropout, ResidualIsOptional) {
  constexpr float p = 0.25f;
  DropoutData d(100);
  Cpu().run(&MH_KernelsApi::dropout, d.args(p, {5, 0, 100, 100}, false));
  for (int64_t i = 0; i < d.n; ++i) EXPECT_NEAR(d.out[i], d.mask[i] ? d.x[i] / (1 - p) : 0.0f, 1e-6) << i;
}

// Tensor and sequence parallelism hand each rank a slice of the global
// tensor; the slice must draw the same mask the whole tensor draws there.
TEST(Dropout, ShardDrawsWhatTheWholeTensorDrawsThere) {
  constexpr int64_t rows = 4, len = 16;
  const Cpu cpu;
  DropoutData whole(rows * len);
  cpu.run(&MH_KernelsApi::dropout, whole.args(0.5f, {9, 500, len, len}));
  DropoutData columns(rows * len / 2);  // columns [8, 16) of every row
  cpu.run(&MH_KernelsApi::dropout, columns.args(0.5f, {9, 500 + len / 2, len / 2, len}));
  DropoutData last_rows(2 * len);  // rows [2, 4)
  cpu.run(&MH_KernelsApi::dropout, last_rows.args(0.5f, {9, 500 + 2 * len, len, len}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < len; ++j) {
      if (j >= len / 2) {
        EXPECT_EQ(columns.mask[r * len / 2 + j - len / 2], whole.mask[r * len + j]) << r << ", " << j;
      }
      if (r >= 2) {
        EXPECT_EQ(last_rows.mask[(r - 2) * len + j], whole.mask[r * len + j]) << r << ", " << j;
      }
    }
}

TEST(Dropout, ATeamDrawsWhatOneThreadDrawsAcrossRowBoundaries) {
  const int64_t len = 9000;  // rows that the threads' halves cut inside; past team()'s threshold
  DropoutData one(5 * len), two(5 * len);
  Cpu(1).run(&MH_KernelsApi::dropout, one.args(0.4f, {21, 7, uint64_t(len), uint64_t(2 * len)}));
  Cpu(2).run(&MH_KernelsApi::dropout, two.args(0.4f, {21, 7, uint64_t(len), uint64_t(2 * len)}));
  EXPECT_EQ(one.mask, two.mask);
  EXPECT_EQ(one.out, two.out);
}

TEST(Dropout, KeepsAboutOneMinusP) {
  DropoutData d(1 << 16);
  Cpu(2).run(&MH_KernelsApi::dropout, d.args(0.3f, {11, 0, 1 << 10, 1 << 10}));
  int64_t kept = 0;
  for (uint8_t m : d.mask) kept += m;
  EXPECT_NEAR(static_cast<double>(kept) / d.n, 0.7, 0.01);
}

TEST(Dropout, ZeroPKeepsEverything) {
  DropoutData d(1000);
  Cpu().run(&MH_KernelsApi::dropout, d.args(0.0f, {13, 0, 1000, 1000}));
  for (int64_t i = 0; i < d.n; ++i) {
    ASSERT_EQ(d.mask[i], 1) << i;
    EXPECT_FLOAT_EQ(d.out[i], d.x[i] + d.residual[i]) << i;
  }
}

// Backward reads dout from `out`, writes dx into `x`, with the forward's mask.
TEST(Dropout, BackwardMatchesFiniteDifferencesWithTheSameMask) {
  constexpr float p = 0.2f;
  DropoutData d(300);
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::dropout, d.args(p, {17, 3, 300, 300}));
  const std::vector<float> x = d.x, dout = random_floats(d.n, 3);
  d.out = dout;
  cpu.run(&MH_KernelsApi::dropout_bwd, d.args(p, {}));
  const auto grad = numeric_gradient(to_double(x), [&](const std::vector<double>& v) {
    double loss = 0;
    for (int64_t i = 0; i < d.n; ++i) loss += dout[i] * (v[i] * d.mask[i] / (1 - p) + d.residual[i]);
    return loss;
  });
  EXPECT_TRUE(all_close(d.x, grad, kGradRtol, kGradAtol));
}

}  // namespace
}  // namespace mh::kernels::test
