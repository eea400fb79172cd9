#include "bf16.hpp"
#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

constexpr float kTheta = 10000.0f;

// A [G, S, D] view into a buffer: element (g, s, i) at offset + g * batch + s * row + i.
struct Layout {
  int64_t G, S, D, batch, row, offset = 0;
  int64_t at(int64_t g, int64_t s, int64_t i) const { return offset + g * batch + s * row + i; }
  int64_t span() const { return at(G - 1, S - 1, D); }
  static Layout contiguous(int64_t G, int64_t S, int64_t D) { return {G, S, D, S * D, D}; }
};

MH_Tensor view_of(std::vector<float>& buffer, const Layout& l) {
  MH_Tensor t = with_strides(view(buffer.data() + l.offset, MH_F32, {l.G, l.S, l.D}), {l.batch, l.row, 1});
  return t;
}

// The angle of pair i at position p as Hugging Face forms it: inv_freq =
// 1 / theta^(2i/D) in f32 (the power correctly rounded), times p in f32.
double hf_angle(int64_t p, int64_t i, int64_t D) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
  const float inv_freq = 1.0f / static_cast<float>(std::pow(double{kTheta}, double{exponent}));
  return static_cast<double>(static_cast<float>(p) * inv_freq);
}

// The same angle in exact arithmetic.
double exact_angle(int64_t p, int64_t i, int64_t D) {
  return static_cast<double>(p) * std::pow(static_cast<double>(kTheta), -2.0 * static_cast<double>(i) / D);
}

// out = the buffer with the view at `l` rotated, in double.
template <class Angle>
std::vector<double> rope_ref(const std::vector<double>& buffer, const Layout& l, int64_t offset, bool inverse,
                             Angle angle) {
  std::vector<double> out = buffer;
  const int64_t half = l.D / 2;
  for (int64_t g = 0; g < l.G; ++g)
    for (int64_t s = 0; s < l.S; ++s)
      for (int64_t i = 0; i < half; ++i) {
        const double a = buffer[l.at(g, s, i)], b = buffer[l.at(g, s, i + half)];
        const double t = angle(offset + s, i, l.D) * (inverse ? -1 : 1);
        out[l.at(g, s, i)] = a * std::cos(t) - b * std::sin(t);
        out[l.at(g, s, i + half)] = b * std::cos(t) + a * std::sin(t);
      }
  return out;
}

MH_RopeArgs rope_args(MH_Tensor x, MH_Tensor out, int64_t offset, bool inverse) {
  MH_RopeArgs a{};
  a.struct_size = MH_STRUCT_SIZE(MH_RopeArgs, inverse);
  a.x = x;
  a.out = out;
  a.position_offset = offset;
  a.theta = kTheta;
  a.inverse = inverse;
  return a;
}

// Rotates the view at `l` of `buffer` in place.
void rope_in_place(const Cpu& cpu, std::vector<float>& buffer, const Layout& l, int64_t offset, bool inverse) {
  const MH_Tensor t = view_of(buffer, l);
  cpu.run(&MH_KernelsApi::rope, rope_args(t, t, offset, inverse));
}

// Head sizes around the SIMD width (pairs of 1, 3, 8, 33, 64) and positions
// up to 4100, where an f32 angle is 4e-4 off the exact one.
TEST(Rope, MatchesHuggingFaceAnglesToF32Rounding) {
  const Cpu cpu;
  for (auto [D, offset] : {std::pair<int64_t, int64_t>{2, 0}, {6, 3}, {16, 0}, {66, 7}, {128, 4090}}) {
    SCOPED_TRACE("D = " + std::to_string(D) + ", offset " + std::to_string(offset));
    const Layout l = Layout::contiguous(3, 10, D);
    std::vector<float> x = random_floats(l.span(), 1), out(l.span());
    cpu.run(&MH_KernelsApi::rope, rope_args(view_of(x, l), view_of(out, l), offset, false));
    EXPECT_TRUE(all_close(out, rope_ref(to_double(x), l, offset, false, hf_angle), 1e-5, 1e-6));
  }
}

// At small positions the f32 angle is the exact one to 1e-7 relative: the
// kernel rotates by theta^(-2i/D) per position, not by something near it.
TEST(Rope, MatchesExactRotationAtSmallPositions) {
  const Layout l = Layout::contiguous(2, 16, 64);
  std::vector<float> x = random_floats(l.span(), 2), out(l.span());
  Cpu().run(&MH_KernelsApi::rope, rope_args(view_of(x, l), view_of(out, l), 0, false));
  EXPECT_TRUE(all_close(out, rope_ref(to_double(x), l, 0, false, exact_angle), 1e-5, 1e-5));
}

// Packed documents (ABI 1.6): row s of head g sits at positions[g / (G / B), s]
// (plus position_offset), bit for bit as the same row rotated at that offset.
TEST(Rope, PackedDocumentsRotateEachRowByItsOwnPosition) {
  const int64_t G = 4, B = 2, S = 6, D = 10, offset = 7;
  const std::vector<int32_t> positions = {0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 4, 5};
  std::vector<float> x = random_floats(G * S * D, 6), out(x.size(), 0.0f);
  const Layout l = Layout::contiguous(G, S, D);
  MH_RopeArgs args = rope_args(view_of(x, l), view_of(out, l), offset, false);
  args.struct_size = sizeof(args);
  args.positions = view(const_cast<int32_t*>(positions.data()), MH_I32, {B, S});
  const Cpu cpu;
  cpu.run(&MH_KernelsApi::rope, args);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t s = 0; s < S; ++s) {
      std::vector<float> row(x.begin() + (g * S + s) * D, x.begin() + (g * S + s + 1) * D);
      rope_in_place(cpu, row, Layout::contiguous(1, 1, D), offset + positions[size_t((g / (G / B)) * S + s)], false);
      for (int64_t i = 0; i < D; ++i) ASSERT_EQ(out[size_t((g * S + s) * D + i)], row[size_t(i)]) << g << ", " << s;
    }
}

TEST(Rope, InPlaceMatchesOutOfPlace) {
  const Cpu cpu;
  const Layout l = Layout::contiguous(4, 9, 34);
  std::vector<float> x = random_floats(l.span(), 3), out(l.span());
  cpu.run(&MH_KernelsApi::rope, rope_args(view_of(x, l), view_of(out, l), 5, false));
  rope_in_place(cpu, x, l, 5, false);
  EXPECT_EQ(x, out);
}

TEST(Rope, InverseUndoesTheRotation) {
  const Cpu cpu;
  const Layout l = Layout::contiguous(2, 33, 128);
  const std::vector<float> x = random_floats(l.span(), 4);
  std::vector<float> y = x;
  rope_in_place(cpu, y, l, 100, false);
  EXPECT_FALSE(all_close(y, x, 1e-3, 1e-3));
  rope_in_place(cpu, y, l, 100, true);
  EXPECT_TRUE(all_close(y, x, 1e-6, 1e-6));
}

// The backward is the inverse rotation applied to dout: the gradient of
// sum(dout * rope(x)) by finite differences.
TEST(Rope, InverseIsTheFiniteDifferenceGradient) {
  const Layout l = Layout::contiguous(2, 3, 10);
  const std::vector<float> x = random_floats(l.span(), 5);
  std::vector<float> dx = random_floats(l.span(), 6);
  const std::vector<float> dout = dx;
  rope_in_place(Cpu(), dx, l, 11, true);
  const auto loss = [&](const std::vector<double>& v) {
    const auto y = rope_ref(v, l, 11, false, hf_angle);
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += y[i] * dout[i];
    return sum;
  };
  EXPECT_TRUE(all_close(dx, numeric_gradient(to_double(x), loss), kGradRtol, kGradAtol));
}

// The engine rotates Q and K where the QKV projection left them: per token a
// row of G heads, each [q | k | v] (3 D), or G groups of m query heads, one
// key and one value head ((m + 2) D). The heads it does not name stay as they are.
TEST(Rope, RotatesStridedHeadsInAFusedQkvBufferAndNothingElse) {
  const Cpu cpu;
  constexpr int64_t G = 3, S = 7, D = 12;
  for (int64_t per_group : {int64_t{3}, int64_t{4}}) {  // 3 D: [q | k | v]; 4 D: two query heads, k, v
    SCOPED_TRACE(std::to_string(per_group) + " heads per group");
    const int64_t row = G * per_group * D;
    std::vector<float> qkv = random_floats(S * row, 7);
    const std::vector<float> before = qkv;
    std::vector<double> expected = to_double(qkv);
    for (int64_t head = 0; head + 1 < per_group; ++head) {  // every query head and the key head, not v
      const Layout l{G, S, D, per_group * D, row, head * D};
      rope_in_place(cpu, qkv, l, 2, false);
      expected = rope_ref(expected, l, 2, false, hf_angle);
    }
    EXPECT_TRUE(all_close(qkv, expected, 1e-5, 1e-6));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < D; ++i) {
          const int64_t v = s * row + g * per_group * D + (per_group - 1) * D + i;
          ASSERT_EQ(qkv[v], before[v]) << "value head changed at " << v;
        }
  }
}

// bf16 storage, f32 angles and arithmetic: one rounding of the f32 result.
TEST(Rope, Bf16InPlaceOnStridedHeadsRoundsTheF32ResultOnce) {
  constexpr int64_t G = 2, S = 5, D = 18, row = G * 3 * D;
  std::vector<float> values = random_floats(S * row, 8);
  std::vector<uint16_t> qkv16;
  for (float& v : values) {
    qkv16.push_back(cpu::to_bf16(v));
    v = cpu::from_bf16(qkv16.back());
  }
  const Layout k{G, S, D, 3 * D, row, D};
  rope_in_place(Cpu(), values, k, 3, false);
  const Instance<CpuKernels> bf16_cpu(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  const MH_Tensor t = with_strides(view(qkv16.data() + D, MH_BF16, {G, S, D}), {3 * D, row, 1});
  bf16_cpu.run(&MH_KernelsApi::rope, rope_args(t, t, 3, false));
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(qkv16[i], cpu::to_bf16(values[i])) << i;
}

}  // namespace
}  // namespace mh::kernels::test
