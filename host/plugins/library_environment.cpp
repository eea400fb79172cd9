#include "plugins/library_environment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace mh {
namespace {

// Plugins that compute on the CPU run OpenMP teams, whose idle threads spin
// before they sleep: libgomp's default is 300,000 pauses, milliseconds. Where
// the cores are shared (ranks in other processes, a second job, a build), the
// spinning takes the core from the very thread it waits for; a bf16 decode
// step ran 17x slower than with sleeping threads at load 11 on 2 cores
// (docs/kernels-cpu.md). Too short a spin costs the other way: a thread asleep
// between back-to-back ops is woken for the next, tens of microseconds each
// on a virtual machine (single-stream decode, 73 products a token, ran 20%
// slower for it on an idle 2-core Xeon). So idle threads spin long enough to
// bridge the engine's gaps between ops where the cores are this process's,
// and a fifth of that where other work already keeps them busy, counted in
// this CPU's pauses, whose length differs several times between CPUs.
constexpr double kSpinMicroseconds = 50, kBusyCoresSpinMicroseconds = 10;

// Whether other work keeps this process's cores busy: the 1-minute load
// average as the process starts, against the cores it may run on.
bool cores_busy() {
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  cpu_set_t cores;
  if (sched_getaffinity(0, sizeof cores, &cores) != 0) return false;
  return load >= CPU_COUNT(&cores);
}

// The shortest of a few timed runs of pauses: a run the thread lost its core
// in only lengthens (so shortens the spin).
double pause_nanoseconds() {
#if defined(__x86_64__) || defined(__i386__)
  constexpr int kPauses = 2000;
  double best = 1e9;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kPauses; ++i) _mm_pause();
    best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  }
  return best / kPauses;
#else
  return 50;  // no pause instruction to time: 1,000 spins for 50 us
#endif
}

void bound_openmp_spinning() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  const double spin = cores_busy() ? kBusyCoresSpinMicroseconds : kSpinMicroseconds;
  ::setenv("GOMP_SPINCOUNT", std::to_string(pauses_spanning(spin, pause_nanoseconds())).c_str(), 0);
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

int64_t pauses_spanning(double microseconds, double pause_nanoseconds) {
  return std::clamp<int64_t>(std::llround(microseconds * 1000 / std::max(pause_nanoseconds, 0.1)), 100, 100000);
}

void prepare_library_environment() {
  bound_openmp_spinning();
  choose_openblas_core();
}

}  // namespace mh
