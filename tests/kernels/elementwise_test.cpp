#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

MH_ElementwiseArgs elementwise_args(MH_UnaryOp op, std::vector<float>& x, std::vector<float>& y,
                                    std::vector<float>& out, float alpha = 0.0f) {
  const int64_t n = static_cast<int64_t>(out.size());
  MH_ElementwiseArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_ElementwiseArgs, alpha);
  args.op = op;
  args.x = view(x, {n});
  args.y = view(y, {n});
  args.out = view(out, {n});
  args.alpha = alpha;
  return args;
}

// Sizes below and above the point where the ops start using two threads.
constexpr int64_t kSizes[] = {1001, 40000};

TEST(Gelu, ForwardMatchesTanhApproximation) {
  for (int64_t n : kSizes) {
    std::vector<float> x = random_floats(n, 1, -5.0f, 5.0f), out(n);
    Cpu().run(&MH_KernelsApi::elementwise, elementwise_args(MH_GELU, x, x, out));
    std::vector<double> expected(n);
    for (int64_t i = 0; i < n; ++i) expected[i] = gelu_ref(x[i]);
    EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6));
  }
}

TEST(Gelu, ForwardInPlace) {
  std::vector<float> x = random_floats(99, 2, -3.0f, 3.0f);
  const std::vector<float> x0 = x;
  Cpu().run(&MH_KernelsApi::elementwise, elementwise_args(MH_GELU, x, x, x));
  std::vector<double> expected(x0.size());
  for (size_t i = 0; i < x0.size(); ++i) expected[i] = gelu_ref(x0[i]);
  EXPECT_TRUE(all_close(x, expected, 1e-5, 1e-6));
}

// GELU_BWD: out = y * gelu'(x), y being the output gradient.
TEST(Gelu, BackwardMatchesFiniteDifferences) {
  constexpr int64_t n = 257;
  std::vector<float> x = random_floats(n, 3, -4.0f, 4.0f), dout = random_floats(n, 4), dx(n);
  Cpu().run(&MH_KernelsApi::elementwise, elementwise_args(MH_GELU_BWD, x, dout, dx));
  const auto grad = numeric_gradient(to_double(x), [&](const std::vector<double>& v) {
    double loss = 0;
    for (int64_t i = 0; i < n; ++i) loss += dout[i] * gelu_ref(v[i]);
    return loss;
  });
  EXPECT_TRUE(all_close(dx, grad, kGradRtol, kGradAtol));
}

TEST(Elementwise, ScaleCopyFillAddAxpyMatchReference) {
  struct Case {
    MH_UnaryOp op;
    double (*ref)(double x, double y, double alpha);
  };
  const Case cases[] = {
      {MH_SCALE, [](double x, double, double a) { return a * x; }},
      {MH_COPY, [](double x, double, double) { return x; }},
      {MH_FILL, [](double, double, double a) { return a; }},
      {MH_ADD, [](double x, double y, double) { return x + y; }},
      {MH_AXPY, [](double x, double y, double a) { return a * x + y; }},
  };
  constexpr float alpha = -1.75f;
  for (int64_t n : kSizes)
    for (const Case& c : cases) {
      SCOPED_TRACE("op " + std::to_string(c.op) + ", n " + std::to_string(n));
      std::vector<float> x = random_floats(n, 5), y = random_floats(n, 6), out = random_floats(n, 7);
      Cpu().run(&MH_KernelsApi::elementwise, elementwise_args(c.op, x, y, out, alpha));
      std::vector<double> expected(n);
      for (int64_t i = 0; i < n; ++i) expected[i] = c.ref(x[i], y[i], alpha);
      EXPECT_TRUE(all_close(out, expected, 1e-6, 1e-7));
    }
}

}  // namespace
}  // namespace mh::kernels::test
