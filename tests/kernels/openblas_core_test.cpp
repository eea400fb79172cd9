// kernels "cpu" makes OpenBLAS run the kernels of the CPU's widest vectors,
// even on a CPU newer than the OpenBLAS release (which took a 5th-generation
// Xeon for a Prescott).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "openblas_core.hpp"

extern "C" char* openblas_get_corename();

namespace {

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

TEST(OpenblasCore, KernelsUseTheCpusWidestVectors) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE chooses the kernels";
  if (::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init") == nullptr) GTEST_SKIP() << "OpenBLAS built for one CPU";
  mh::kernels::cpu::use_best_openblas_core();
  const std::string core = openblas_get_corename();
  const std::set<std::string> avx512 = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  if (has_avx512())
    EXPECT_TRUE(avx512.count(core)) << core;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_TRUE(core == "Haswell" || core == "Zen") << core;
}

}  // namespace
