#include "plugins/library_environment.hpp"

#include <cstdlib>

namespace mh {
namespace {

// Plugins that compute on the CPU run OpenMP teams, whose idle threads spin
// before they sleep: libgomp's default is 300,000 pauses, milliseconds. Where
// the cores are shared (ranks in other processes, a second job, a build), the
// spinning takes the core from the very thread it waits for; a bf16 decode
// step ran 17x slower than with sleeping threads at load 11 on 2 cores
// (docs/kernels-cpu.md). A thousand pauses, tens of microseconds and
// libgomp's own figure for more threads than cores, still bridge the gap
// between back-to-back ops.
void bound_openmp_spinning() {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) ::setenv("GOMP_SPINCOUNT", "1000", 0);
}

// OpenBLAS chooses its kernels by the CPU's model number, and a release does
// not know the models that came after it: Debian 12's 0.3.21 takes a
// 5th-generation Xeon (family 6, model 207) for a Prescott and runs its SSE3
// kernels, 4.5x slower than its AVX-512 ones on the same CPU. This chooses by
// the CPU's features instead, as oneDNN does. Making the library choose
// again once started (gotoblas_dynamic_quit/init) crashed inside it in one
// of a thousand-odd launches; its start-up reading the choice cannot.
// nullptr below AVX2, where the model number decides.
const char* widest_openblas_core() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
  return nullptr;
}

void choose_openblas_core() {
  if (const char* core = widest_openblas_core()) ::setenv("OPENBLAS_CORETYPE", core, 0);
}

}  // namespace

void prepare_library_environment() {
  bound_openmp_spinning();
  choose_openblas_core();
}

}  // namespace mh
