#include "openblas_core.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string_view>

extern "C" char* openblas_get_corename();

namespace mh::kernels::cpu {
namespace {

// The widest vectors a core's kernels use: 512, 256, or 128 for the rest.
int vector_bits(std::string_view core) {
  for (std::string_view c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == c) return 512;
  for (std::string_view c : {"Haswell", "Zen"})
    if (core == c) return 256;
  return 128;
}

// The core whose kernels this CPU's features run best; nullptr below AVX2.
const char* best_core() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
  return nullptr;
}

}  // namespace

void use_best_openblas_core() {
  const char* best = best_core();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || best == nullptr ||
      vector_bits(openblas_get_corename()) >= vector_bits(best))
    return;
  // Exported by OpenBLAS's builds for many CPUs (Debian's); a build for one
  // CPU has neither and its kernels are fixed.
  using Hook = void (*)();
  auto quit = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<Hook>(::dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return;
  ::setenv("OPENBLAS_CORETYPE", best, 0);
  quit();
  init();
}

}  // namespace mh::kernels::cpu
