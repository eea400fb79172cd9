#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

constexpr float kEps = 1e-5f;

// out (N, C) = (x - mean) * rstd * weight + bias, in double
std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& weight,
                                  const std::vector<double>& bias, int64_t N, int64_t C,
                                  std::vector<double>* mean = nullptr, std::vector<double>* rstd = nullptr) {
  std::vector<double> out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) m += x[n * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (x[n * C + c] - m) * (x[n * C + c] - m) / C;
    const double s = 1.0 / std::sqrt(var + kEps);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = (x[n * C + c] - m) * s * weight[c] + bias[c];
    if (mean != nullptr) mean->push_back(m);
    if (rstd != nullptr) rstd->push_back(s);
  }
  return out;
}

struct LayerNormData {
  int64_t N, C;
  std::vector<float> x, weight, bias, out, mean, rstd;

  LayerNormData(int64_t N, int64_t C)
      : N(N), C(C), x(random_floats(N * C, 1, -1.0f, 3.0f)), weight(random_floats(C, 2, 0.5f, 1.5f)),
        bias(random_floats(C, 3)), out(N * C), mean(N), rstd(N) {}

  void forward(const Cpu& cpu) {
    MH_LayerNormArgs args{};
    args.struct_size = MH_STRUCT_SIZE(MH_LayerNormArgs, eps);
    args.x = view(x, {N, C});
    args.weight = view(weight, {C});
    args.bias = view(bias, {C});
    args.out = view(out, {N, C});
    args.mean = view(mean, {N});
    args.rstd = view(rstd, {N});
    args.eps = kEps;
    cpu.run(&MH_KernelsApi::layernorm, args);
  }

  // dx, dweight, dbias += the gradients of sum(dout * out)
  void backward(const Cpu& cpu, std::vector<float>& dout, std::vector<float>& dx, std::vector<float>& dweight,
                std::vector<float>& dbias) {
    MH_LayerNormBwdArgs args{};
    args.struct_size = MH_STRUCT_SIZE(MH_LayerNormBwdArgs, dbias);
    args.dout = view(dout, {N, C});
    args.x = view(x, {N, C});
    args.weight = view(weight, {C});
    args.mean = view(mean, {N});
    args.rstd = view(rstd, {N});
    args.dx = view(dx, {N, C});
    args.dweight = view(dweight, {C});
    args.dbias = view(dbias, {C});
    cpu.run(&MH_KernelsApi::layernorm_bwd, args);
  }
};

std::vector<double> plus(const std::vector<float>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

double dot(const std::vector<double>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

TEST(LayerNorm, ForwardMatchesReference) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{5, 37}, {64, 769}}) {
    SCOPED_TRACE(std::to_string(N) + " x " + std::to_string(C));
    LayerNormData d(N, C);
    d.forward(Cpu());
    std::vector<double> mean, rstd;
    const auto out = layernorm_ref(to_double(d.x), to_double(d.weight), to_double(d.bias), N, C, &mean, &rstd);
    EXPECT_TRUE(all_close(d.out, out, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(d.mean, mean, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(d.rstd, rstd, 1e-5, 1e-6));
  }
}

TEST(LayerNorm, BackwardAccumulatesFiniteDifferenceGradients) {
  constexpr int64_t N = 3, C = 11;
  LayerNormData d(N, C);
  const Cpu cpu;
  d.forward(cpu);
  std::vector<float> dout = random_floats(N * C, 4);
  std::vector<float> dx = random_floats(N * C, 5), dweight = random_floats(C, 6), dbias = random_floats(C, 7);
  const auto dx0 = dx, dweight0 = dweight, dbias0 = dbias;
  d.backward(cpu, dout, dx, dweight, dbias);

  const auto x = to_double(d.x), w = to_double(d.weight), b = to_double(d.bias);
  const auto grad_x = numeric_gradient(x, [&](const auto& v) { return dot(layernorm_ref(v, w, b, N, C), dout); });
  const auto grad_w = numeric_gradient(w, [&](const auto& v) { return dot(layernorm_ref(x, v, b, N, C), dout); });
  const auto grad_b = numeric_gradient(b, [&](const auto& v) { return dot(layernorm_ref(x, w, v, N, C), dout); });
  EXPECT_TRUE(all_close(dx, plus(dx0, grad_x), kGradRtol, kGradAtol));
  EXPECT_TRUE(all_close(dweight, plus(dweight0, grad_w), kGradRtol, kGradAtol));
  EXPECT_TRUE(all_close(dbias, plus(dbias0, grad_b), kGradRtol, kGradAtol));
}

TEST(LayerNorm, BackwardOnTwoThreadsMatchesOneThread) {
  constexpr int64_t N = 64, C = 600;
  LayerNormData d(N, C);
  d.forward(Cpu());
  std::vector<float> dout = random_floats(N * C, 8);
  std::vector<float> dx[2], dweight[2], dbias[2];
  for (int threads : {1, 2}) {
    dx[threads - 1].assign(N * C, 0.0f);
    dweight[threads - 1].assign(C, 0.0f);
    dbias[threads - 1].assign(C, 0.0f);
    d.backward(Cpu(threads), dout, dx[threads - 1], dweight[threads - 1], dbias[threads - 1]);
  }
  EXPECT_TRUE(all_close(dx[1], dx[0], 1e-5, 1e-6));
  EXPECT_TRUE(all_close(dweight[1], dweight[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(dbias[1], dbias[0], 1e-5, 1e-5));
}

}  // namespace
}  // namespace mh::kernels::test
