#include "bf16.hpp"
#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

// Causal scores [G, Q, T]: the Q rows are the last Q positions of T, so row i
// sees columns 0 .. T - Q + i (Q = T = S in training, Q = 1 in decode).
struct Scores {
  int64_t G, Q, T;
  int64_t size() const { return G * Q * T; }
  int64_t seen(int64_t row) const { return T - Q + row % Q + 1; }
  std::string name() const { return std::to_string(G) + " x [" + std::to_string(Q) + ", " + std::to_string(T) + "]"; }
};

// Softmax of scale * x over the visible columns of each row, in double; the
// masked ones are 0.
std::vector<double> softmax_ref(const std::vector<double>& x, double scale, Scores s) {
  std::vector<double> out(s.size(), 0.0);
  for (int64_t row = 0; row < s.G * s.Q; ++row) {
    const double* xr = x.data() + row * s.T;
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j < s.seen(row); ++j) max = std::max(max, scale * xr[j]);
    for (int64_t j = 0; j < s.seen(row); ++j) sum += std::exp(scale * xr[j] - max);
    for (int64_t j = 0; j < s.seen(row); ++j) out[row * s.T + j] = std::exp(scale * xr[j] - max) / sum;
  }
  return out;
}

// d(sum dout * softmax(x)) / dx in double, from the forward's output.
std::vector<double> softmax_bwd_ref(const std::vector<double>& out, const std::vector<double>& dout, double scale,
                                    Scores s) {
  std::vector<double> dx(s.size(), 0.0);
  for (int64_t row = 0; row < s.G * s.Q; ++row) {
    const int64_t base = row * s.T;
    double dot = 0;
    for (int64_t j = 0; j < s.seen(row); ++j) dot += dout[base + j] * out[base + j];
    for (int64_t j = 0; j < s.seen(row); ++j) dx[base + j] = out[base + j] * (dout[base + j] - dot) * scale;
  }
  return dx;
}

template <class T>
MH_SoftmaxArgs softmax_args(std::vector<T>& x, std::vector<T>& out, std::vector<T>& dout, std::vector<T>& dx,
                            Scores s, float scale, int32_t dtype) {
  MH_SoftmaxArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
  args.x = view(x.data(), dtype, {s.G, s.Q, s.T});
  args.out = view(out.data(), dtype, {s.G, s.Q, s.T});
  args.dout = view(dout.data(), dtype, {s.G, s.Q, s.T});
  args.dx = view(dx.data(), dtype, {s.G, s.Q, s.T});
  args.scale = scale;
  return args;
}

MH_SoftmaxArgs softmax_args(std::vector<float>& x, std::vector<float>& out, std::vector<float>& dout,
                            std::vector<float>& dx, Scores s, float scale) {
  return softmax_args(x, out, dout, dx, s, scale, MH_F32);
}

// Square, decode (Q = 1), a chunk of a prefill, and odd sizes around the SIMD width.
const Scores kShapes[] = {{3, 7, 7}, {8, 64, 64}, {4, 1, 1}, {4, 1, 9}, {2, 1, 70}, {3, 5, 12}, {2, 17, 33}};

TEST(Softmax, ForwardIsCausalWithZerosPastEachRowsPosition) {
  for (const Scores s : kShapes) {
    SCOPED_TRACE(s.name());
    constexpr float scale = 0.35f;
    std::vector<float> x = random_floats(s.size(), 1, -3.0f, 3.0f), out(s.size(), 5.0f), unused;
    Cpu().run(&MH_KernelsApi::softmax, softmax_args(x, out, unused, unused, s, scale));
    EXPECT_TRUE(all_close(out, softmax_ref(to_double(x), scale, s), 1e-5, 1e-7));
    for (int64_t row = 0; row < s.G * s.Q; ++row)
      for (int64_t j = s.seen(row); j < s.T; ++j) ASSERT_EQ(out[row * s.T + j], 0.0f) << row << ", " << j;
  }
}

TEST(Softmax, BackwardMatchesTheAnalyticGradientWithZerosWhereMasked) {
  for (const Scores s : kShapes) {
    SCOPED_TRACE(s.name());
    constexpr float scale = 0.7f;
    std::vector<float> x = random_floats(s.size(), 2, -2.0f, 2.0f), out(s.size()), dout = random_floats(s.size(), 3),
                       dx(s.size(), 9.0f);
    const Cpu cpu;
    cpu.run(&MH_KernelsApi::softmax, softmax_args(x, out, dout, dx, s, scale));
    cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(x, out, dout, dx, s, scale));
    EXPECT_TRUE(all_close(dx, softmax_bwd_ref(to_double(out), to_double(dout), scale, s), 1e-5, 1e-7));
    for (int64_t row = 0; row < s.G * s.Q; ++row)
      for (int64_t j = s.seen(row); j < s.T; ++j) ASSERT_EQ(dx[row * s.T + j], 0.0f) << row << ", " << j;
  }
}

// Packed documents (ABI 1.6): the row at position p sees only columns
// starts[b, p] .. p, b = g / (G / B); forward and backward equal the causal
// op on each document alone, with zeros before the document's start.
TEST(Softmax, PackedDocumentsSeeOnlyTheirOwnColumns) {
  const Scores s{4, 12, 12};
  const int64_t B = 2;
  // Sample 0: documents [0, 5), [5, 12); sample 1: [0, 3), [3, 4), [4, 12).
  const std::vector<int32_t> starts = {0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 3, 4, 4, 4, 4, 4, 4, 4, 4};
  constexpr float scale = 0.6f;
  std::vector<float> x = random_floats(s.size(), 4, -2.0f, 2.0f), out(s.size(), 5.0f),
                     dout = random_floats(s.size(), 5), dx(s.size(), 9.0f);
  MH_SoftmaxArgs args = softmax_args(x, out, dout, dx, s, scale);
  args.struct_size = sizeof(args);
  args.starts = view(const_cast<int32_t*>(starts.data()), MH_I32, {B, s.T});
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::softmax, args);
  cpu.run(&MH_KernelsApi::softmax_bwd, args);
  for (int64_t row = 0; row < s.G * s.Q; ++row) {
    const int64_t p = row % s.Q, first = starts[size_t((row / s.Q / (s.G / B)) * s.T + p)], n = p + 1 - first;
    // The document alone: causal [1, n, n] scores whose last row is this one.
    const Scores alone{1, 1, n};
    std::vector<double> xr(static_cast<size_t>(n)), dr(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) xr[size_t(j)] = x[size_t(row * s.T + first + j)];
    const std::vector<double> want = softmax_ref(xr, scale, alone);
    for (int64_t j = 0; j < n; ++j) dr[size_t(j)] = dout[size_t(row * s.T + first + j)];
    const std::vector<double> want_dx = softmax_bwd_ref(want, dr, scale, alone);
    for (int64_t j = 0; j < s.T; ++j) {
      const bool seen = j >= first && j <= p;
      EXPECT_NEAR(out[size_t(row * s.T + j)], seen ? want[size_t(j - first)] : 0.0, 1e-6) << row << ", " << j;
      EXPECT_NEAR(dx[size_t(row * s.T + j)], seen ? want_dx[size_t(j - first)] : 0.0, 1e-6) << row << ", " << j;
    }
  }
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  for (const Scores s : {Scores{2, 5, 5}, Scores{2, 2, 6}}) {
    SCOPED_TRACE(s.name());
    constexpr float scale = 0.7f;
    std::vector<float> x = random_floats(s.size(), 2, -2.0f, 2.0f), out(s.size()),
                       dout = random_floats(s.size(), 3), dx(s.size(), 9.0f);
    const Cpu cpu;
    cpu.run(&MH_KernelsApi::softmax, softmax_args(x, out, dout, dx, s, scale));
    cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(x, out, dout, dx, s, scale));
    const auto grad = numeric_gradient(to_double(x), [&](const std::vector<double>& v) {
      const auto y = softmax_ref(v, scale, s);
      double loss = 0;
      for (size_t i = 0; i < y.size(); ++i) loss += dout[i] * y[i];
      return loss;
    });
    EXPECT_TRUE(all_close(dx, grad, kGradRtol, kGradAtol));
  }
}

// Decode attends with the last rows of the square scores prefill would
// build: they must come out bit for bit as those rows of the square op.
TEST(Softmax, LastRowsOfSquareScoresAreTheNonSquareResultExactly) {
  constexpr int64_t G = 3, T = 40;
  constexpr float scale = 0.5f;
  std::vector<float> x = random_floats(G * T * T, 4, -3.0f, 3.0f), dout = random_floats(G * T * T, 5);
  std::vector<float> out(G * T * T), dx(G * T * T);
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::softmax, softmax_args(x, out, dout, dx, {G, T, T}, scale));
  cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(x, out, dout, dx, {G, T, T}, scale));
  for (const int64_t Q : {1, 3, 17}) {
    SCOPED_TRACE("Q = " + std::to_string(Q));
    const Scores s{G, Q, T};
    auto last_rows = [&](const std::vector<float>& square) {
      std::vector<float> rows;
      for (int64_t g = 0; g < G; ++g)
        rows.insert(rows.end(), square.begin() + (g * T + T - Q) * T, square.begin() + (g + 1) * T * T);
      return rows;
    };
    std::vector<float> xq = last_rows(x), doutq = last_rows(dout), outq(s.size()), dxq(s.size());
    cpu.run(&MH_KernelsApi::softmax, softmax_args(xq, outq, doutq, dxq, s, scale));
    cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(xq, outq, doutq, dxq, s, scale));
    EXPECT_EQ(outq, last_rows(out));
    EXPECT_EQ(dxq, last_rows(dx));
  }
}

// bf16 storage, f32 math: within bf16 rounding (8 mantissa bits) of the
// double reference on the bf16 inputs, forward and backward.
TEST(Softmax, Bf16NonSquareForwardAndBackwardWithinBf16Rounding) {
  const Instance<CpuKernels> cpu(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  for (const Scores s : {Scores{4, 1, 1}, Scores{4, 1, 37}, Scores{3, 6, 20}, Scores{2, 16, 16}}) {
    SCOPED_TRACE(s.name());
    constexpr float scale = 0.4f;
    std::vector<uint16_t> x, dout, out(s.size()), dx(s.size(), 0x7fc0);
    for (float v : random_floats(s.size(), 6, -3.0f, 3.0f)) x.push_back(cpu::to_bf16(v));
    for (float v : random_floats(s.size(), 7)) dout.push_back(cpu::to_bf16(v));
    cpu.run(&MH_KernelsApi::softmax, softmax_args(x, out, dout, dx, s, scale, MH_BF16));
    cpu.run(&MH_KernelsApi::softmax_bwd, softmax_args(x, out, dout, dx, s, scale, MH_BF16));
    auto values = [](const std::vector<uint16_t>& v) {
      std::vector<float> f;
      for (uint16_t b : v) f.push_back(cpu::from_bf16(b));
      return f;
    };
    const std::vector<double> out_ref = softmax_ref(to_double(values(x)), scale, s);
    EXPECT_TRUE(all_close(values(out), out_ref, 1e-2, 1e-4));
    // The backward reads the bf16 forward output, as the engine's does.
    EXPECT_TRUE(all_close(values(dx), softmax_bwd_ref(to_double(values(out)), to_double(values(dout)), scale, s),
                          1e-2, 1e-4));
  }
}

}  // namespace
}  // namespace mh::kernels::test
