#include "test_util.hpp"

namespace mh::kernels::test {
namespace {

MH_EmbeddingArgs embedding_args(std::vector<float>& table, std::vector<int32_t>& ids, std::vector<float>& out,
                                int64_t C, int64_t id_start, bool accumulate) {
  const int64_t N = static_cast<int64_t>(ids.size()), R = static_cast<int64_t>(table.size()) / C;
  MH_EmbeddingArgs args{};
  args.struct_size = MH_STRUCT_SIZE(MH_EmbeddingArgs, accumulate);
  args.table = view(table, {R, C});
  args.ids = view(ids, {N});
  args.out = view(out, {N, C});
  args.id_start = id_start;
  args.accumulate = accumulate;
  return args;
}

// out (N, C) [+]= the table row of each id inside [id_start, id_start + R), else 0
std::vector<double> lookup_ref(const std::vector<double>& table, const std::vector<int32_t>& ids,
                               const std::vector<float>& out, int64_t C, int64_t id_start, bool accumulate) {
  const int64_t R = static_cast<int64_t>(table.size()) / C;
  std::vector<double> result(out.size());
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t row = ids[n] - id_start;
      const double value = row >= 0 && row < R ? table[row * C + c] : 0.0;
      result[n * C + c] = (accumulate ? out[n * C + c] : 0.0) + value;
    }
  return result;
}

// A vocabulary shard holding ids [10, 16): the others look up zeros.
constexpr int64_t kC = 5, kIdStart = 10;
const std::vector<int32_t> kIds = {9, 10, 15, 16, 12, 12, -3};

TEST(Embedding, ForwardLooksUpTheRowsOfThisShard) {
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "assign");
    std::vector<float> table = random_floats(6 * kC, 1), out = random_floats(kIds.size() * kC, 2);
    std::vector<int32_t> ids = kIds;
    const auto expected = lookup_ref(to_double(table), ids, out, kC, kIdStart, accumulate);
    Cpu().run(&MH_KernelsApi::embedding, embedding_args(table, ids, out, kC, kIdStart, accumulate));
    EXPECT_TRUE(all_close(out, expected, 1e-6, 1e-7));
  }
}

// Backward: dtable (in `table`) += dout (in `out`) at each id of this shard.
TEST(Embedding, BackwardAccumulatesFiniteDifferenceGradients) {
  std::vector<float> dtable = random_floats(6 * kC, 3), dout = random_floats(kIds.size() * kC, 4);
  std::vector<int32_t> ids = kIds;
  const std::vector<float> dtable0 = dtable;
  Cpu().run(&MH_KernelsApi::embedding_bwd, embedding_args(dtable, ids, dout, kC, kIdStart, false));
  auto expected = numeric_gradient(to_double(random_floats(6 * kC, 5)), [&](const std::vector<double>& table) {
    const auto out = lookup_ref(table, ids, dout, kC, kIdStart, false);
    double loss = 0;
    for (size_t i = 0; i < out.size(); ++i) loss += dout[i] * out[i];
    return loss;
  });
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += dtable0[i];
  EXPECT_TRUE(all_close(dtable, expected, kGradRtol, kGradAtol));
}

TEST(Embedding, BackwardAddsRepeatedIdsOnTwoThreads) {
  constexpr int64_t N = 300, R = 10, C = 150;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>(n * 7 % 14) - 2;  // repeats, some outside
  std::vector<float> dtable(R * C, 0.5f), dout = random_floats(N * C, 6);
  std::vector<double> expected(R * C, 0.5);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      if (ids[n] >= 0 && ids[n] < R) expected[ids[n] * C + c] += dout[n * C + c];
  Cpu(2).run(&MH_KernelsApi::embedding_bwd, embedding_args(dtable, ids, dout, C, 0, false));
  EXPECT_TRUE(all_close(dtable, expected, 1e-5, 1e-5));
}

}  // namespace
}  // namespace mh::kernels::test
