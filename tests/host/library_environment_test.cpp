// Before it loads the first plugin, the host bounds how long idle OpenMP
// threads spin and has OpenBLAS run the kernels of the CPU's widest vectors
// (host/plugins/library_environment.cpp says why), and leaves a user's own
// settings as set. Each test runs in its own process (ctest), so the
// environment it changes is its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "host/megahost_process.hpp"
#include "plugins/library_environment.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh::host::testing {
namespace {

std::string after_loading(const char* variable) {
  Diagnostics diag;
  load_plugins({}, diag);
  const char* value = std::getenv(variable);
  return value == nullptr ? "unset" : value;
}

std::string spin_count_after_loading() { return after_loading("GOMP_SPINCOUNT"); }

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

TEST(OpenMpSpinning, LoadingPluginsBoundsTheSpinCountTheUserLeftUnset) {
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv("OMP_WAIT_POLICY");
  const std::string count = spin_count_after_loading();
  ASSERT_NE(count, "unset");
  EXPECT_GE(std::stoll(count), 100);
  EXPECT_LE(std::stoll(count), 100000);
}

TEST(OpenMpSpinning, TheSpinLastsFiftyMicrosecondsOfThisCpusPauses) {
  EXPECT_EQ(pauses_spanning(50, 10), 5000);  // a 2026 Xeon's pause
  EXPECT_EQ(pauses_spanning(50, 40), 1250);  // a Skylake-era Xeon's
  EXPECT_EQ(pauses_spanning(50, 1e6), 100);  // a pause timed across a lost core: the floor
  EXPECT_EQ(pauses_spanning(50, 0), 100000);
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

TEST(OpenblasCore, LoadingPluginsNamesTheCoreOfTheCpusWidestVectors) {
  ::unsetenv("OPENBLAS_CORETYPE");
  const std::string core = after_loading("OPENBLAS_CORETYPE");
  if (has_avx512())
    EXPECT_EQ(core, __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX");
  else if (has_avx2())
    EXPECT_EQ(core, __builtin_cpu_is("amd") ? "Zen" : "Haswell");
  else
    EXPECT_EQ(core, "unset");
}

TEST(OpenblasCore, TheUsersCoreIsKept) {
  ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  EXPECT_EQ(after_loading("OPENBLAS_CORETYPE"), "Prescott");
}

// What OpenBLAS itself runs, as the run's log names it: the environment
// reached the library before its start-up read it.
TEST(OpenblasCore, ARunsOpenblasUsesTheCpusWidestVectors) {
  ::unsetenv("OPENBLAS_CORETYPE");
  Outcome o = run_megahost(tiny_run());
  ASSERT_EQ(o.status, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, std::regex(R"(\(OpenBLAS (\w+)\))"))) << o.err;
  const std::string core = m[1];
  if (has_avx512()) {
    EXPECT_THAT(core, ::testing::AnyOf("SkylakeX", "Cooperlake", "SapphireRapids"));
  } else if (has_avx2()) {
    EXPECT_THAT(core, ::testing::AnyOf("Haswell", "Zen"));
  }
}

}  // namespace
}  // namespace mh::host::testing
