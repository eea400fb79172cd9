// The host bounds how long idle OpenMP threads spin before it loads the
// first plugin (host/plugins/plugin_loader.cpp says why), and leaves a
// user's own wait policy or spin count as set. Each test runs in its own
// process (ctest), so the environment it changes is its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "plugins/plugin_loader.hpp"

namespace mh::host::testing {
namespace {

std::string spin_count_after_loading() {
  Diagnostics diag;
  load_plugins({}, diag);
  const char* value = std::getenv("GOMP_SPINCOUNT");
  return value == nullptr ? "unset" : value;
}

TEST(OpenMpSpinning, LoadingPluginsBoundsTheSpinCountTheUserLeftUnset) {
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv("OMP_WAIT_POLICY");
  EXPECT_EQ(spin_count_after_loading(), "1000");
}

TEST(OpenMpSpinning, TheUsersSpinCountIsKept) {
  ::unsetenv("OMP_WAIT_POLICY");
  ::setenv("GOMP_SPINCOUNT", "300000", 1);
  EXPECT_EQ(spin_count_after_loading(), "300000");
}

TEST(OpenMpSpinning, TheUsersWaitPolicyDecidesAlone) {
  ::unsetenv("GOMP_SPINCOUNT");
  ::setenv("OMP_WAIT_POLICY", "active", 1);
  EXPECT_EQ(spin_count_after_loading(), "unset");
}

}  // namespace
}  // namespace mh::host::testing
