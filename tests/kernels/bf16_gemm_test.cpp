// bf16 GEMMs on whichever path this CPU takes (AMX, AVX512-BF16, or the f32
// fallback; bf16_gemm = "f32" forces the last) against a double reference on
// the same bf16 inputs.
//
// The tolerance, per element: the inputs are bf16, so each product a_ik b_kj
// is exact in f32 (8 + 8 significant bits); f32 accumulation of K products
// in any order (blocked, pairwise in vdpbf16ps, tiles in AMX) is off by at
// most K u32 sum_k |a_ik b_kj| (u32 = 2^-24, the standard bound of recursive
// summation), alpha and beta add two more roundings, and a bf16 c is rounded
// once more, by at most u = 2^-8 of the result (half a unit in the last of
// its 8 significant bits).
// The bf16 units flush subnormals to zero; the inputs here are far from them.
#include "bf16.hpp"
#include "test_util.hpp"

#include <cmath>
#include <limits>

namespace mh::kernels::test {
namespace {

using cpu::from_bf16;
using cpu::to_bf16;

std::vector<uint16_t> bf16_values(size_t n, uint32_t seed) {
  std::vector<uint16_t> v;
  for (float x : random_floats(n, seed)) v.push_back(to_bf16(x));
  return v;
}

struct Case {
  const char* name;
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  bool broadcast_a, broadcast_b;  // batch stride 0
  float alpha, beta;
  bool bf16_c;
  bool side_by_side = false;  // a, b and c stored [rows, batch, cols] (attention's heads in a row)
};

// Offset of element (i, row, col) of `batches` stored matrices of rows x cols.
int64_t offset_of(bool side_by_side, int64_t batches, int64_t rows, int64_t cols, int64_t i, int64_t row, int64_t col) {
  return side_by_side ? (row * batches + i) * cols + col : (i * rows + row) * cols + col;
}

MH_Tensor stored(void* data, int32_t dtype, const Case& c, int64_t rows, int64_t cols) {
  MH_Tensor t = view(data, dtype, {c.batch, rows, cols});
  if (c.side_by_side) {
    t.strides[0] = cols;
    t.strides[1] = c.batch * cols;
  }
  return t;
}

// c[i] = alpha op(a[i]) op(b[i]) + beta c[i], checked element by element.
void check(const Instance<CpuKernels>& k, const Case& c) {
  SCOPED_TRACE(c.name);
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  const int64_t a_batches = c.broadcast_a ? 1 : c.batch, b_batches = c.broadcast_b ? 1 : c.batch;
  std::vector<uint16_t> a = bf16_values(size_t(a_batches * a_rows * a_cols), 11);
  std::vector<uint16_t> b = bf16_values(size_t(b_batches * b_rows * b_cols), 12);
  std::vector<float> c0 = random_floats(size_t(c.batch * c.m * c.n), 13);
  if (c.beta == 0.0f) c0.assign(c0.size(), std::numeric_limits<float>::quiet_NaN());  // never read
  std::vector<float> c_f32 = c0;
  std::vector<uint16_t> c_bf16;
  for (float x : c0) c_bf16.push_back(to_bf16(x));
  MH_Tensor at = stored(a.data(), MH_BF16, c, a_rows, a_cols), bt = stored(b.data(), MH_BF16, c, b_rows, b_cols);
  if (c.broadcast_a) at.strides[0] = 0;
  if (c.broadcast_b) bt.strides[0] = 0;
  const MH_Tensor ct = c.bf16_c ? stored(c_bf16.data(), MH_BF16, c, c.m, c.n) : stored(c_f32.data(), MH_F32, c, c.m, c.n);
  k.run(&MH_KernelsApi::gemm, MH_GemmArgs{MH_STRUCT_SIZE(MH_GemmArgs, beta), at, bt, ct, c.trans_a, c.trans_b,
                                           c.alpha, c.beta});
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t x = 0; x < c.k; ++x) {
          const int64_t ai = c.trans_a ? offset_of(c.side_by_side, a_batches, a_rows, a_cols, c.broadcast_a ? 0 : i, x, r)
                                       : offset_of(c.side_by_side, a_batches, a_rows, a_cols, c.broadcast_a ? 0 : i, r, x);
          const int64_t bi = c.trans_b ? offset_of(c.side_by_side, b_batches, b_rows, b_cols, c.broadcast_b ? 0 : i, j, x)
                                       : offset_of(c.side_by_side, b_batches, b_rows, b_cols, c.broadcast_b ? 0 : i, x, j);
          const double p = double(from_bf16(a[size_t(ai)])) * from_bf16(b[size_t(bi)]);
          sum += p;
          magnitude += std::abs(p);
        }
        const size_t ci = size_t(offset_of(c.side_by_side, c.batch, c.m, c.n, i, r, j));
        const double c_in = c.beta == 0.0f ? 0.0 : (c.bf16_c ? double(from_bf16(to_bf16(c0[ci]))) : double(c0[ci]));
        const double expected = c.alpha * sum + c.beta * c_in;
        const double actual = c.bf16_c ? from_bf16(c_bf16[ci]) : c_f32[ci];
        const double bound = double(c.k + 2) * 0x1p-24 * (std::abs(c.alpha) * magnitude + std::abs(c.beta * c_in)) +
                             (c.bf16_c ? 0x1p-8 * std::abs(expected) : 0.0);
        ASSERT_LE(std::abs(actual - expected), bound) << "batch " << i << ", c(" << r << ", " << j << ")";
      }
}

const Case kCases[] = {
    // A linear layer forward (weight stored (N, K)), its dx and its dW accumulated into f32 gradients.
    {"forward x W^T", 1, 67, 45, 96, false, true, false, false, 1.0f, 0.0f, true},
    {"dx = dy W", 1, 67, 96, 45, false, false, false, false, 1.0f, 0.0f, false},
    {"dW += dy^T x", 1, 45, 96, 67, true, false, false, false, 1.0f, 1.0f, false},
    // Attention: scaled scores, batched, and a broadcast operand.
    {"scores q k^T scaled", 6, 33, 33, 16, false, true, false, false, 0.25f, 0.0f, true},
    {"broadcast a", 3, 9, 17, 24, false, false, true, false, 1.0f, 0.5f, false},
    {"broadcast b", 3, 9, 17, 24, false, true, false, true, -2.0f, 1.0f, true},
    // Decode: one and a few rows against a weight.
    {"one row", 1, 1, 300, 128, false, true, false, false, 1.0f, 0.0f, true},
    {"four rows", 1, 4, 300, 128, false, true, false, false, 1.0f, 0.0f, false},
    // One row on the bf16 units: K with a tail past the 32-pair blocks, N past the 4-row blocks, a
    // batch (attention's decode scores), beta, and a product large enough for the whole team.
    {"one row, tails", 1, 1, 301, 100, false, true, false, false, -0.5f, 1.0f, false},
    {"one row batched", 6, 1, 37, 64, false, true, false, false, 0.125f, 0.0f, true},
    {"one row, broadcast b", 3, 1, 19, 48, false, true, false, true, 1.0f, 0.5f, false},
    {"one row, whole team", 1, 1, 3001, 700, false, true, false, false, 1.0f, 0.0f, true},
    {"both transposed", 2, 13, 7, 40, true, true, false, false, 1.0f, 1.0f, false},
    // Heads side by side in a row, as attention's q, k, v and context are (packed for oneDNN's
    // fast kernels; with beta, c is used in place): scores, probabilities times values, and the
    // backward's transposed products.
    {"side by side: q k^T", 6, 40, 40, 16, false, true, false, false, 0.25f, 0.0f, true, true},
    {"side by side: p v", 6, 40, 16, 40, false, false, false, false, 1.0f, 0.0f, true, true},
    {"side by side: dv = p^T do", 4, 24, 16, 24, true, false, false, false, 1.0f, 0.0f, false, true},
    {"side by side, beta", 4, 24, 16, 24, false, false, false, false, 1.0f, 1.0f, false, true},
    // alpha 0 (a LoRA adapter at alpha 0) is BLAS's c = beta c: zeros over a c never read.
    {"alpha 0", 1, 67, 8, 96, false, true, false, false, 0.0f, 0.0f, false},
};

TEST(Bf16Gemm, EveryEngineViewMatchesADoubleReferenceWithinF32Accumulation) {
  const Instance<CpuKernels> k(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  for (const Case& c : kCases) check(k, c);
}

TEST(Bf16Gemm, TheF32FallbackMeetsTheSameBound) {
  const Instance<CpuKernels> k(
      Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}, {"bf16_gemm", "\"f32\""}});
  for (const Case& c : kCases) check(k, c);
}

TEST(Bf16Gemm, TheDeviceNameSaysWhichUnitsRunBf16Gemms) {
  const Instance<CpuKernels> k(Overrides{{"threads", "1"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  EXPECT_NE(std::string(k.device_info().name).find(cpu::describe(cpu::detect_bf16_units())), std::string::npos);
  const Instance<CpuKernels> forced(
      Overrides{{"threads", "1"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}, {"bf16_gemm", "\"f32\""}});
  EXPECT_NE(std::string(forced.device_info().name).find("bf16 GEMM: none"), std::string::npos);
}

}  // namespace
}  // namespace mh::kernels::test
