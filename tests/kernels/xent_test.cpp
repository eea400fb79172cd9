#include "test_util.hpp"

#include <algorithm>

namespace mh::kernels::test {
namespace {

// One rank's view of the cross-entropy: logits (N, V) of the vocabulary
// shard [id_start, id_start + V), and the per-row vectors.
struct Xent {
  int64_t N, V, id_start, id_limit = 0;
  std::vector<float> logits;
  std::vector<int32_t> targets;
  std::vector<float> row_max, sum_exp, target_logit;

  Xent(std::vector<float> logits, std::vector<int32_t> targets, int64_t V, int64_t id_start)
      : N(static_cast<int64_t>(targets.size())), V(V), id_start(id_start), logits(std::move(logits)),
        targets(std::move(targets)), row_max(N), sum_exp(N), target_logit(N) {}

  void step(const Cpu& cpu, MH_XentStep step, float scale = 1.0f) {
    MH_XentArgs args{};
    args.struct_size = MH_STRUCT_SIZE(MH_XentArgs, id_limit);
    args.step = step;
    args.logits = view(logits, {N, V});
    args.targets = view(targets, {N});
    args.row_max = view(row_max, {N});
    args.sum_exp = view(sum_exp, {N});
    args.target_logit = view(target_logit, {N});
    args.id_start = id_start;
    args.scale = scale;
    args.id_limit = id_limit;
    cpu.run(&MH_KernelsApi::xent, args);
  }
};

// sum over rows of log(sum_v exp(l[n, v])) - l[n, target], in double
double loss_ref(const std::vector<double>& logits, const std::vector<int32_t>& targets, int64_t V) {
  double loss = 0;
  for (size_t n = 0; n < targets.size(); ++n) {
    double max = -1e300, sum = 0;
    for (int64_t v = 0; v < V; ++v) max = std::max(max, logits[n * V + v]);
    for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - max);
    loss += std::log(sum) + max - logits[n * V + targets[n]];
  }
  return loss;
}

TEST(Xent, StepsGiveTheLossOfEachRow) {
  for (auto [V, targets] : {std::pair<int64_t, std::vector<int32_t>>{11, {0, 10, 5, 3}},
                            {5000, {1, 4999, 2500, 7, 3000, 42, 0, 1234}}}) {
    SCOPED_TRACE("V = " + std::to_string(V));
    const int64_t N = static_cast<int64_t>(targets.size());
    Xent x(random_floats(N * V, 1, -4.0f, 4.0f), targets, V, 0);
    const Cpu cpu;
    x.step(cpu, MH_XENT_MAX);
    x.step(cpu, MH_XENT_STATS);
    for (int64_t n = 0; n < N; ++n) {
      const std::vector<double> row(x.logits.begin() + n * V, x.logits.begin() + (n + 1) * V);
      const double loss = std::log(x.sum_exp[n]) + x.row_max[n] - x.target_logit[n];
      EXPECT_EQ(x.row_max[n], *std::max_element(row.begin(), row.end())) << n;
      EXPECT_EQ(x.target_logit[n], row[targets[n]]) << n;
      EXPECT_NEAR(loss, loss_ref(row, {targets[n]}, V), 1e-5) << n;
    }
  }
}

TEST(Xent, BackwardIsTheScaledGradientOfTheLoss) {
  constexpr int64_t V = 7;
  constexpr float scale = 0.25f;
  Xent x(random_floats(3 * V, 2, -3.0f, 3.0f), {6, 0, 3}, V, 0);
  const std::vector<float> logits = x.logits;
  const Cpu cpu;
  x.step(cpu, MH_XENT_MAX);
  x.step(cpu, MH_XENT_STATS);
  x.step(cpu, MH_XENT_BWD, scale);
  auto grad = numeric_gradient(to_double(logits), [&](const auto& l) { return loss_ref(l, x.targets, V); });
  for (double& g : grad) g *= scale;
  EXPECT_TRUE(all_close(x.logits, grad, kGradRtol, kGradAtol));
}

// Two vocabulary shards [0, 4) and [4, 11) combine with a max and two sums
// between the steps (the collectives' part) into the unsharded result.
TEST(Xent, VocabularyShardsCombineToTheWholeResult) {
  constexpr int64_t N = 5, V = 11, split = 4;
  const std::vector<float> logits = random_floats(N * V, 3, -4.0f, 4.0f);
  const std::vector<int32_t> targets = {0, 3, 4, 10, 7};
  std::vector<float> left, right;
  for (int64_t n = 0; n < N; ++n) {
    left.insert(left.end(), logits.begin() + n * V, logits.begin() + n * V + split);
    right.insert(right.end(), logits.begin() + n * V + split, logits.begin() + (n + 1) * V);
  }
  const Cpu cpu;
  Xent whole(logits, targets, V, 0), a(left, targets, split, 0), b(right, targets, V - split, split);
  for (Xent* x : {&whole, &a, &b}) x->step(cpu, MH_XENT_MAX);
  for (int64_t n = 0; n < N; ++n) a.row_max[n] = b.row_max[n] = std::max(a.row_max[n], b.row_max[n]);
  for (Xent* x : {&whole, &a, &b}) x->step(cpu, MH_XENT_STATS);
  for (int64_t n = 0; n < N; ++n) {
    a.sum_exp[n] = b.sum_exp[n] = a.sum_exp[n] + b.sum_exp[n];
    a.target_logit[n] = b.target_logit[n] = a.target_logit[n] + b.target_logit[n];
  }
  EXPECT_EQ(a.row_max, whole.row_max);
  EXPECT_EQ(a.target_logit, whole.target_logit);
  EXPECT_TRUE(all_close(a.sum_exp, whole.sum_exp, 1e-6, 0));
  for (Xent* x : {&whole, &a, &b}) x->step(cpu, MH_XENT_BWD, 0.5f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V; ++v) {
      const float shard = v < split ? a.logits[n * split + v] : b.logits[n * (V - split) + v - split];
      EXPECT_NEAR(shard, whole.logits[n * V + v], 1e-6) << n << ", " << v;
    }
}

// Runs the three steps on two vocabulary shards, combining them between the
// steps as the collectives do.
void run_sharded(const Cpu& cpu, Xent& a, Xent& b, float scale) {
  a.step(cpu, MH_XENT_MAX);
  b.step(cpu, MH_XENT_MAX);
  for (int64_t n = 0; n < a.N; ++n) a.row_max[n] = b.row_max[n] = std::max(a.row_max[n], b.row_max[n]);
  a.step(cpu, MH_XENT_STATS);
  b.step(cpu, MH_XENT_STATS);
  for (int64_t n = 0; n < a.N; ++n) {
    a.sum_exp[n] = b.sum_exp[n] = a.sum_exp[n] + b.sum_exp[n];
    a.target_logit[n] = b.target_logit[n] = a.target_logit[n] + b.target_logit[n];
  }
  a.step(cpu, MH_XENT_BWD, scale);
  b.step(cpu, MH_XENT_BWD, scale);
}

// A vocabulary of `vocab` ids padded to V = 12 and split into shards [0, 5)
// and [5, 12): the padded logits (large, so that counting them would show)
// take no part, and the result is that of the unpadded vocabulary. With
// vocab 9 the limit falls inside the second shard; with 4, inside the first,
// and the second shard is padding only.
TEST(Xent, IdsPastTheLimitAreLeftOutOfEveryShard) {
  constexpr int64_t N = 4, V = 12, split = 5;
  const Cpu cpu;
  for (int64_t vocab : {int64_t{9}, int64_t{4}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    std::vector<float> logits = random_floats(N * V, 4, -3.0f, 3.0f), real, left, right;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v) {
        if (v >= vocab) logits[n * V + v] = 40.0f;
        else real.push_back(logits[n * V + v]);
        (v < split ? left : right).push_back(logits[n * V + v]);
      }
    const std::vector<int32_t> targets = {0, 3, int32_t(vocab - 1), 2};
    Xent whole(real, targets, vocab, 0), a(left, targets, split, 0), b(right, targets, V - split, split);
    a.id_limit = b.id_limit = vocab;
    whole.step(cpu, MH_XENT_MAX);
    whole.step(cpu, MH_XENT_STATS);
    whole.step(cpu, MH_XENT_BWD, 0.5f);
    run_sharded(cpu, a, b, 0.5f);
    EXPECT_EQ(a.row_max, whole.row_max);
    EXPECT_EQ(a.target_logit, whole.target_logit);
    EXPECT_TRUE(all_close(a.sum_exp, whole.sum_exp, 1e-6, 0));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v) {
        const float grad = v < split ? a.logits[n * split + v] : b.logits[n * (V - split) + v - split];
        EXPECT_NEAR(grad, v < vocab ? whole.logits[n * vocab + v] : 0.0f, 1e-6) << n << ", " << v;
      }
  }
}

// id_limit 0 and a caller built against ABI 1.2 (its struct ends before
// id_limit) count every column.
TEST(Xent, WithoutALimitEveryColumnCounts) {
  constexpr int64_t N = 2, V = 6;
  std::vector<float> logits = random_floats(N * V, 5);
  const Cpu cpu;
  for (size_t struct_size : {MH_STRUCT_SIZE(MH_XentArgs, id_limit), MH_STRUCT_SIZE(MH_XentArgs, scale)}) {
    std::vector<float> row_max(N);
    MH_XentArgs args{};
    args.struct_size = struct_size;
    args.step = MH_XENT_MAX;
    args.logits = view(logits, {N, V});
    args.row_max = view(row_max, {N});
    args.id_limit = struct_size == MH_STRUCT_SIZE(MH_XentArgs, scale) ? 1 : 0;  // not read when outside the struct
    cpu.run(&MH_KernelsApi::xent, args);
    for (int64_t n = 0; n < N; ++n)
      EXPECT_EQ(row_max[n], *std::max_element(logits.begin() + n * V, logits.begin() + (n + 1) * V)) << struct_size;
  }
}

}  // namespace
}  // namespace mh::kernels::test
