#include "bf16.hpp"
#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

constexpr float kEps = 1e-5f;

// out (N, C) = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), in double
std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& weight, int64_t N, int64_t C,
                                std::vector<double>* rstd = nullptr) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double squares = 0;
    for (int64_t c = 0; c < C; ++c) squares += x[n * C + c] * x[n * C + c];
    const double s = 1.0 / std::sqrt(squares / C + kEps);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * s * weight[c];
    if (rstd != nullptr) rstd->push_back(s);
  }
  return out;
}

double dot(const std::vector<double>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

std::vector<double> plus(const std::vector<float>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

struct RmsNormData {
  int64_t N, C;
  std::vector<float> x, weight, out, rstd;

  RmsNormData(int64_t N, int64_t C)
      : N(N), C(C), x(random_floats(N * C, 1, -1.0f, 3.0f)), weight(random_floats(C, 2, 0.5f, 1.5f)), out(N * C),
        rstd(N) {}

  void forward(const Cpu& cpu) { cpu.run(&MH_KernelsApi::rmsnorm, args(view(x, {N, C}), view(out, {N, C}))); }

  MH_RmsNormArgs args(MH_Tensor x_view, MH_Tensor out_view) {
    MH_RmsNormArgs a{};
    a.struct_size = MH_STRUCT_SIZE(MH_RmsNormArgs, eps);
    a.x = x_view;
    a.weight = view(weight, {C});
    a.out = out_view;
    a.rstd = view(rstd, {N});
    a.eps = kEps;
    return a;
  }

  // dx, dweight += the gradients of sum(dout * out)
  void backward(const Cpu& cpu, std::vector<float>& dout, std::vector<float>& dx, std::vector<float>& dweight) {
    MH_RmsNormBwdArgs a{};
    a.struct_size = MH_STRUCT_SIZE(MH_RmsNormBwdArgs, dweight);
    a.dout = view(dout, {N, C});
    a.x = view(x, {N, C});
    a.weight = view(weight, {C});
    a.rstd = view(rstd, {N});
    a.dx = view(dx, {N, C});
    a.dweight = view(dweight, {C});
    cpu.run(&MH_KernelsApi::rmsnorm_bwd, a);
  }
};

// Sizes around the SIMD width (8 floats) and past the threading threshold.
TEST(RmsNorm, ForwardMatchesReference) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {3, 17}, {64, 769}, {40, 1024}}) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(C));
    RmsNormData d(N, C);
    d.forward(Cpu());
    std::vector<double> rstd;
    const auto out = rmsnorm_ref(to_double(d.x), to_double(d.weight), N, C, &rstd);
    EXPECT_TRUE(all_close(d.out, out, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(d.rstd, rstd, 1e-5, 1e-6));
  }
}

TEST(RmsNorm, InPlaceMatchesOutOfPlace) {
  RmsNormData d(6, 45);
  const Cpu cpu;
  d.forward(cpu);
  std::vector<float> in_place = d.x;
  cpu.run(&MH_KernelsApi::rmsnorm, d.args(view(in_place, {6, 45}), view(in_place, {6, 45})));
  EXPECT_EQ(in_place, d.out);
}

TEST(RmsNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  constexpr int64_t N = 3, C = 11;
  RmsNormData d(N, C);
  const Cpu cpu;
  d.forward(cpu);
  std::vector<float> dout = random_floats(N * C, 4);
  std::vector<float> dx = random_floats(N * C, 5), dweight = random_floats(C, 6);
  const auto dx0 = dx, dweight0 = dweight;
  d.backward(cpu, dout, dx, dweight);

  const auto x = to_double(d.x), w = to_double(d.weight);
  const auto grad_x = numeric_gradient(x, [&](const auto& v) { return dot(rmsnorm_ref(v, w, N, C), dout); });
  const auto grad_w = numeric_gradient(w, [&](const auto& v) { return dot(rmsnorm_ref(x, v, N, C), dout); });
  EXPECT_TRUE(all_close(dx, plus(dx0, grad_x), kGradRtol, kGradAtol));
  EXPECT_TRUE(all_close(dweight, plus(dweight0, grad_w), kGradRtol, kGradAtol));
}

TEST(RmsNorm, BackwardOnTwoThreadsMatchesOneThread) {
  constexpr int64_t N = 64, C = 600;
  RmsNormData d(N, C);
  d.forward(Cpu());
  std::vector<float> dout = random_floats(N * C, 8);
  std::vector<float> dx[2], dweight[2];
  for (int threads : {1, 2}) {
    dx[threads - 1].assign(N * C, 0.0f);
    dweight[threads - 1].assign(C, 0.0f);
    d.backward(Cpu(threads), dout, dx[threads - 1], dweight[threads - 1]);
  }
  EXPECT_TRUE(all_close(dx[1], dx[0], 1e-5, 1e-6));
  EXPECT_TRUE(all_close(dweight[1], dweight[0], 1e-5, 1e-5));
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(cpu::to_bf16(x));
  return out;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out;
  for (uint16_t b : v) out.push_back(cpu::from_bf16(b));
  return out;
}

// bf16 activations, f32 weight, statistics and gradients: the forward is the
// f32 one rounded once (bf16's 8 bits, 4e-3 relative), the backward the f32
// one on the same bf16 values to f32 rounding.
TEST(RmsNorm, Bf16MatchesF32OnTheSameValues) {
  constexpr int64_t N = 9, C = 130;
  RmsNormData d(N, C);
  d.x = from_bf16(to_bf16(d.x));
  const Cpu f32_cpu;
  d.forward(f32_cpu);
  const Instance<CpuKernels> bf16_cpu(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  std::vector<uint16_t> x16 = to_bf16(d.x), out16(N * C);
  std::vector<float> rstd16(N);
  MH_RmsNormArgs a = d.args(view(x16.data(), MH_BF16, {N, C}), view(out16.data(), MH_BF16, {N, C}));
  a.rstd = view(rstd16, {N});
  bf16_cpu.run(&MH_KernelsApi::rmsnorm, a);
  EXPECT_TRUE(all_close(from_bf16(out16), d.out, 4e-3, 1e-6));
  EXPECT_TRUE(all_close(rstd16, d.rstd, 1e-6, 0));

  const std::vector<float> dout = from_bf16(to_bf16(random_floats(N * C, 9)));
  std::vector<uint16_t> dout16 = to_bf16(dout);
  std::vector<float> dx(N * C), dweight(C), dx16(N * C), dweight16(C), dout_f32 = dout;
  d.backward(f32_cpu, dout_f32, dx, dweight);
  MH_RmsNormBwdArgs b{};
  b.struct_size = MH_STRUCT_SIZE(MH_RmsNormBwdArgs, dweight);
  b.dout = view(dout16.data(), MH_BF16, {N, C});
  b.x = view(x16.data(), MH_BF16, {N, C});
  b.weight = view(d.weight, {C});
  b.rstd = view(rstd16, {N});
  b.dx = view(dx16, {N, C});
  b.dweight = view(dweight16, {C});
  bf16_cpu.run(&MH_KernelsApi::rmsnorm_bwd, b);
  EXPECT_TRUE(all_close(dx16, dx, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(dweight16, dweight, 1e-5, 1e-6));
}

TEST(RmsNorm, Bf16ComponentRejectsABf16Weight) {
  const Instance<CpuKernels> k(Overrides{{"threads", "1"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  std::vector<uint16_t> x(12), out(12), weight(4);
  std::vector<float> rstd(3);
  MH_RmsNormArgs a{};
  a.struct_size = MH_STRUCT_SIZE(MH_RmsNormArgs, eps);
  a.x = view(x.data(), MH_BF16, {3, 4});
  a.weight = view(weight.data(), MH_BF16, {4});
  a.out = view(out.data(), MH_BF16, {3, 4});
  a.rstd = view(rstd, {3});
  const mh::ErrorPtr error = k.fails(&MH_KernelsApi::rmsnorm, a);
  ASSERT_NE(error, nullptr);
  EXPECT_STREQ(error->message, "rmsnorm: weight must be f32, got bf16");
}

}  // namespace
}  // namespace mh::kernels::test
