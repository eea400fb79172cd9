#include "bf16.hpp"
#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

double silu(double g) { return g / (1 + std::exp(-g)); }

// out (N, F) = silu(x[:, :F]) * x[:, F:2F], x in rows ld apart, in double
std::vector<double> swiglu_ref(const std::vector<double>& x, int64_t N, int64_t F, int64_t ld) {
  std::vector<double> out(N * F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < F; ++j) out[n * F + j] = silu(x[n * ld + j]) * x[n * ld + F + j];
  return out;
}

MH_SwigluArgs swiglu_args(MH_Tensor x, MH_Tensor out, MH_Tensor dout, MH_Tensor dx) {
  return {MH_STRUCT_SIZE(MH_SwigluArgs, dx), x, out, dout, dx};
}

MH_Tensor rows(std::vector<float>& data, int64_t N, int64_t cols, int64_t ld) {
  return with_strides(view(data, {N, cols}), {ld, 1});
}

// Widths around the SIMD width and past the threading threshold; x rows
// either exactly 2F or inside wider rows (ld > 2F).
TEST(Swiglu, ForwardMatchesReference) {
  const Cpu cpu;
  for (auto [N, F, pad] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 0}, {3, 7, 0}, {5, 33, 3}, {64, 1000, 0},
                           {17, 129, 11}}) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(F) + ", pad " + std::to_string(pad));
    const int64_t ld = 2 * F + pad;
    std::vector<float> x = random_floats(N * ld, 1, -6.0f, 6.0f), out(N * F);
    cpu.run(&MH_KernelsApi::swiglu, swiglu_args(rows(x, N, 2 * F, ld), view(out, {N, F}), {}, {}));
    EXPECT_TRUE(all_close(out, swiglu_ref(to_double(x), N, F, ld), 1e-5, 1e-6));
  }
}

// dx is written, not accumulated: what it held before does not matter.
TEST(Swiglu, BackwardWritesTheFiniteDifferenceGradient) {
  constexpr int64_t N = 3, F = 9, ld = 2 * F + 2;
  const std::vector<float> x0 = random_floats(N * ld, 2, -5.0f, 5.0f);
  std::vector<float> x = x0, dout = random_floats(N * F, 3), dx = random_floats(N * 2 * F, 4, 50.0f, 60.0f);
  Cpu().run(&MH_KernelsApi::swiglu_bwd, swiglu_args(rows(x, N, 2 * F, ld), {}, view(dout, {N, F}), view(dx, {N, 2 * F})));
  const auto grad = numeric_gradient(to_double(x0), [&](const std::vector<double>& v) {
    const auto out = swiglu_ref(v, N, F, ld);
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += out[i] * dout[i];
    return sum;
  });
  std::vector<double> expected;  // the gradient without the row padding, which swiglu never reads
  for (int64_t n = 0; n < N; ++n) expected.insert(expected.end(), grad.begin() + n * ld, grad.begin() + n * ld + 2 * F);
  EXPECT_TRUE(all_close(dx, expected, kGradRtol, kGradAtol));
}

// Saturated gates: silu is g or 0, its slope 1 or 0, and nothing is NaN.
TEST(Swiglu, LargeGatesSaturateWithoutNan) {
  std::vector<float> x = {-200.0f, 200.0f, 3.0f, 5.0f}, out(2), dout = {1.0f, 1.0f}, dx(4);
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::swiglu, swiglu_args(view(x, {1, 4}), view(out, {1, 2}), {}, {}));
  cpu.run(&MH_KernelsApi::swiglu_bwd, swiglu_args(view(x, {1, 4}), {}, view(dout, {1, 2}), view(dx, {1, 4})));
  EXPECT_TRUE(all_close(out, std::vector<double>{0.0, 1000.0}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dx, std::vector<double>{0.0, 5.0, 0.0, 200.0}, 1e-6, 1e-6));
}

std::vector<uint16_t> to_bf16(std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float& x : v) {
    out.push_back(cpu::to_bf16(x));
    x = cpu::from_bf16(out.back());
  }
  return out;
}

// bf16 storage, f32 math: each output is the f32 one on the same values,
// rounded once.
TEST(Swiglu, Bf16RoundsTheF32ResultOnce) {
  constexpr int64_t N = 7, F = 45;
  std::vector<float> x = random_floats(N * 2 * F, 5, -4.0f, 4.0f), dout = random_floats(N * F, 6);
  std::vector<uint16_t> x16 = to_bf16(x), dout16 = to_bf16(dout), out16(N * F), dx16(N * 2 * F);
  std::vector<float> out(N * F), dx(N * 2 * F);
  const Cpu f32_cpu;
  f32_cpu.run(&MH_KernelsApi::swiglu, swiglu_args(view(x, {N, 2 * F}), view(out, {N, F}), {}, {}));
  f32_cpu.run(&MH_KernelsApi::swiglu_bwd, swiglu_args(view(x, {N, 2 * F}), {}, view(dout, {N, F}), view(dx, {N, 2 * F})));
  const Instance<CpuKernels> bf16_cpu(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  const MH_Tensor xt = view(x16.data(), MH_BF16, {N, 2 * F});
  bf16_cpu.run(&MH_KernelsApi::swiglu, swiglu_args(xt, view(out16.data(), MH_BF16, {N, F}), {}, {}));
  bf16_cpu.run(&MH_KernelsApi::swiglu_bwd, swiglu_args(xt, {}, view(dout16.data(), MH_BF16, {N, F}),
                                                       view(dx16.data(), MH_BF16, {N, 2 * F})));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out16[i], cpu::to_bf16(out[i])) << i;
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx16[i], cpu::to_bf16(dx[i])) << i;
}

}  // namespace
}  // namespace mh::kernels::test
