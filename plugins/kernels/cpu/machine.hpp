// What the CPU kernels need to know about the machine they run on.
#pragma once

#include <cstdint>
#include <string>

namespace mh::kernels::cpu {

// Physical cores this process may run on: the CPUs of its affinity mask
// (taskset, cgroup cpusets), counting SMT siblings once. At least 1.
int physical_cores();

// "AMD EPYC 7B13", or "unknown CPU".
std::string cpu_model();

// The theoretical f32 peak of `cores` cores, FLOP/s: FMA units x vector
// lanes x 2 x clock (the CPU's documented maximum, else its current one).
double theoretical_peak_flops(int cores);

// Installed memory, 0 if unknown.
uint64_t physical_memory_bytes();

}  // namespace mh::kernels::cpu
