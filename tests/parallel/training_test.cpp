// Training behaves: it learns, validation follows, and a seed fixes every bit.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "layout_run.hpp"

namespace mh::test {
namespace {

TEST(Training, SameSeedTwiceGivesBitIdenticalLosses) {
  LayoutResult a = run_layout("train.seed=42");
  LayoutResult b = run_layout("train.seed=42");
  ASSERT_EQ(a.exit_code, 0) << a.log;
  ASSERT_EQ(b.exit_code, 0) << b.log;
  ASSERT_EQ(a.losses.size(), 5u);
  EXPECT_EQ(a.losses, b.losses);
}

TEST(Training, AnotherSeedGivesOtherLosses) {
  LayoutResult a = run_layout("train.seed=42");
  LayoutResult b = run_layout("train.seed=43");
  ASSERT_EQ(a.exit_code, 0) << a.log;
  ASSERT_EQ(b.exit_code, 0) << b.log;
  EXPECT_NE(a.losses, b.losses);
}

TEST(Training, LossFallsWellBelowUniformAndValidationFollows) {
  LayoutResult r = run_layout("train.steps=60 train.eval_interval=20 train.lr=3e-3 train.warmup_steps=5");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_EQ(r.losses.size(), 60u);
  const double uniform = std::log(257.0);  // byte tokenizer: 256 bytes + end of document
  // Initial logits are near uniform over the vocabulary; the padding to 384 is out of the softmax.
  EXPECT_NEAR(r.losses.front(), uniform, 0.1);
  EXPECT_LT(r.losses.back(), 0.7 * uniform);
  ASSERT_GE(r.val_losses.size(), 3u);
  EXPECT_LT(r.val_losses.back(), r.val_losses.front());
  EXPECT_LT(r.val_losses.back(), 0.7 * uniform);
}

}  // namespace
}  // namespace mh::test
