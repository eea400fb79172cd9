// strided_copy (ABI 1.4): a bit-for-bit copy between two strided [G, R, C]
// views, as the generation engine appends keys and values to its KV cache.
#include "bf16.hpp"
#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

// A [G, R, C] view of a buffer: element (g, r, c) at offset + g * batch + r * row + c.
struct Layout {
  int64_t G, R, C, batch, row, offset;
  int64_t at(int64_t g, int64_t r, int64_t c) const { return offset + g * batch + r * row + c; }
  int64_t span() const { return at(G - 1, R - 1, C); }
};

template <class T>
MH_Tensor view_of(std::vector<T>& buffer, int32_t dtype, const Layout& l) {
  return with_strides(view(buffer.data() + l.offset, dtype, {l.G, l.R, l.C}), {l.batch, l.row, 1});
}

template <class T>
MH_StridedCopyArgs copy_args(std::vector<T>& x, const Layout& xl, std::vector<T>& out, const Layout& ol,
                             int32_t dtype) {
  MH_StridedCopyArgs a{};
  a.struct_size = MH_STRUCT_SIZE(MH_StridedCopyArgs, out);
  a.x = view_of(x, dtype, xl);
  a.out = view_of(out, dtype, ol);
  return a;
}

// Copies the view `xl` of a buffer of distinct values into the view `ol` of a
// buffer of `fill`; every element of the view must arrive and nothing else change.
template <class T>
void expect_copied(const Instance<CpuKernels>& cpu, int32_t dtype, std::vector<T> x, const Layout& xl, const Layout& ol, T fill) {
  std::vector<T> out(size_t(ol.span()) + 7, fill);
  const std::vector<T> before = out;
  cpu.run(&MH_KernelsApi::strided_copy, copy_args(x, xl, out, ol, dtype));
  std::vector<T> expected = before;
  for (int64_t g = 0; g < xl.G; ++g)
    for (int64_t r = 0; r < xl.R; ++r)
      for (int64_t c = 0; c < xl.C; ++c) expected[ol.at(g, r, c)] = x[xl.at(g, r, c)];
  EXPECT_EQ(out, expected);
}

// Keys of one new token per sequence, heads interleaved in a fused QKV row
// ([heads, 1, D], rows 3 H apart), into position 5 of a [heads, T, D] cache;
// and a prefill's [heads, S, D] into positions 0..S-1.
const std::pair<Layout, Layout> kCopies[] = {
    {{4, 1, 8, 8, 96, 32}, {4, 1, 8, 16 * 8, 8, 5 * 8}},
    {{4, 6, 8, 8, 96, 32}, {4, 6, 8, 16 * 8, 8, 0}},
    {{3, 5, 7, 45, 9, 1}, {3, 5, 7, 7, 21, 2}},  // x's groups stacked, out's side by side
};

TEST(StridedCopy, CopiesF32ViewsIntoStridedViewsAndNothingElse) {
  const Cpu cpu;
  for (const auto& [xl, ol] : kCopies) {
    const std::vector<float> x = random_floats(size_t(xl.span()), 1);
    expect_copied(cpu, MH_F32, x, xl, ol, -7.0f);
  }
}

// Bit for bit, whatever the component computes in: an f32 component copies
// bf16 and i32 without converting them.
TEST(StridedCopy, CopiesBf16AndI32BitForBit) {
  const Instance<CpuKernels> bf16_cpu(Overrides{{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  for (const auto& [xl, ol] : kCopies) {
    std::vector<uint16_t> x16;
    for (float v : random_floats(size_t(xl.span()), 2)) x16.push_back(cpu::to_bf16(v));
    x16[0] = 0x7fc1;  // a NaN with a payload, which a conversion would not keep
    expect_copied(Cpu(), MH_BF16, x16, xl, ol, uint16_t{0xbeef});
    expect_copied(bf16_cpu, MH_BF16, x16, xl, ol, uint16_t{0xbeef});
    std::vector<int32_t> ids(size_t(xl.span()));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i * 2654435761u);
    expect_copied(Cpu(), MH_I32, ids, xl, ol, int32_t{-1});
  }
}

// Large enough to be split over the team, with rows of odd length.
TEST(StridedCopy, LargeCopyOverManyRowsMatchesRowByRow) {
  const Layout xl{16, 512, 65, 512 * 70, 70, 3}, ol{16, 512, 65, 65, 16 * 65, 0};
  expect_copied(Cpu(4), MH_F32, random_floats(size_t(xl.span()), 3), xl, ol, 0.0f);
}

TEST(StridedCopy, EmptyViewsCopyNothing) {
  std::vector<float> x(8, 1.0f), out(8, 2.0f);
  Cpu().run(&MH_KernelsApi::strided_copy, copy_args(x, {2, 0, 4, 4, 4, 0}, out, {2, 0, 4, 4, 4, 0}, MH_F32));
  EXPECT_EQ(out, std::vector<float>(8, 2.0f));
}

TEST(StridedCopy, RejectsABadViewNamingIt) {
  std::vector<float> x(64), out(64);
  MH_StridedCopyArgs a = copy_args(x, {2, 3, 4, 12, 4, 0}, out, {2, 3, 4, 12, 4, 0}, MH_F32);
  a.out.strides[1] = 3;  // rows 3 apart, 4 long
  const mh::ErrorPtr error = Cpu().fails(&MH_KernelsApi::strided_copy, a);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_INVALID_ARGUMENT);
  EXPECT_STREQ(error->message,
               "strided_copy: the rows of out [2, 3, 4] overlap with strides [12, 3, 1] (rows must lie at least D "
               "apart, batch after batch or side by side)");
}

}  // namespace
}  // namespace mh::kernels::test
