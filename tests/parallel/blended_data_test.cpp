// Blended datasets give every layout the same samples: the data position is
// a global sample index, and the blend chooses a dataset by that index alone,
// so losses match one rank's as closely as with a single dataset.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

// The shipped corpus blended with itself under another shuffle (each listed
// dataset has its own order), 30/70. A path on the command line resolves
// against the working directory, so it is absolute here.
const std::string kBlend = std::string("'data.paths=0.3 ") + MEGAHOST_TEST_DATA + " 0.7 " + MEGAHOST_TEST_DATA + "' ";

TEST(BlendedData, EveryLayoutSeesTheSameSamplesAsOneRank) {
  LayoutResult one = run_layout(kBlend + "comm.world_size=1");
  ASSERT_EQ(one.exit_code, 0) << one.log;
  ASSERT_EQ(one.losses.size(), 5u);
  EXPECT_NE(one.losses, run_layout("comm.world_size=1").losses) << "the blend changed nothing";
  for (const char* layout :
       {"comm.world_size=2", "comm.world_size=4 parallel.tensor.size=2 parallel.pipeline.size=2"}) {
    LayoutResult r = run_layout(kBlend + layout);
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.log;
    ASSERT_EQ(r.losses.size(), one.losses.size()) << layout;
    for (size_t i = 0; i < r.losses.size(); ++i) {
      EXPECT_NEAR(r.losses[i], one.losses[i], 1e-5 * std::fabs(one.losses[i])) << layout << ", step " << i + 1;
    }
  }
}

}  // namespace
}  // namespace mh::test
